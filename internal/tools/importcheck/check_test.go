package main

import (
	"strings"
	"testing"
)

func TestCheckSource(t *testing.T) {
	const mod = "example.com/m"
	for _, tc := range []struct {
		name, imports string
		want          []string // substrings of the problems, in order
	}{
		{name: "one std import", imports: `import "fmt"`},
		{name: "all three groups", imports: `import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"example.com/m/a"
	"example.com/m"
)`},
		{name: "doc comment keeps the group", imports: `import (
	"fmt"
	// os is for Exit
	"os"

	"example.com/m/a"
)`},
		{name: "std and local only", imports: `import (
	"fmt"

	"example.com/m/a"
)`},
		{name: "third-party in std group", imports: `import (
	"fmt"
	"golang.org/x/sys/unix"
)`, want: []string{"third-party import golang.org/x/sys/unix in a group of standard library"}},
		{name: "local before third-party", imports: `import (
	"fmt"

	"example.com/m/a"

	"golang.org/x/sys/unix"
)`, want: []string{"third-party imports (golang.org/x/sys/unix) after this module's"}},
		{name: "std split in two groups", imports: `import (
	"fmt"

	"os"
)`, want: []string{"a second group of standard library imports starts with os"}},
		{name: "two import declarations", imports: `import "example.com/m/a"

import "fmt"`, want: []string{"standard library imports (fmt) after this module's"}},
		{name: "similar prefix is not this module", imports: `import (
	"fmt"

	"example.com/mm"
)`},
		{name: "named and blank imports", imports: `import (
	_ "embed"
	str "strings"

	m "example.com/m"
)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "package p\n\n" + tc.imports + "\n"
			problems, err := checkSource("p.go", []byte(src), mod)
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) != len(tc.want) {
				t.Fatalf("problems %v, want %d matching %q", problems, len(tc.want), tc.want)
			}
			for i, p := range problems {
				if !strings.Contains(p.Msg, tc.want[i]) {
					t.Errorf("problem %d is %q, want it to contain %q", i, p.Msg, tc.want[i])
				}
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for path, want := range map[string]class{
		"fmt":                              classStd,
		"net/http":                         classStd,
		"golang.org/x/sys/unix":            classOther,
		"github.com/purerbd/purerbd":       classLocal,
		"github.com/purerbd/purerbd/rados": classLocal,
		"github.com/purerbd/purerbdx":      classOther,
	} {
		if got := classify(path, "github.com/purerbd/purerbd"); got != want {
			t.Errorf("classify(%s) = %v, want %v", path, got, want)
		}
	}
}
