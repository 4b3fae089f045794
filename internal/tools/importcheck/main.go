// Command importcheck fails when a Go file's imports are not grouped the
// project's way: the standard library first, then third-party modules,
// then this module's packages, each in one group, groups separated by a
// blank line. gofmt sorts within groups but does not check them.
//
// Usage, from the module root (the module path is read from go.mod):
//
//	go run ./internal/tools/importcheck [file.go ...]
//
// Without arguments it checks every .go file under the current directory,
// skipping testdata and directories whose names start with "." or "_".
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "importcheck:", err)
		os.Exit(1)
	}
}

// errProblems says problems were printed.
var errProblems = errors.New("imports not grouped std / third-party / this module")

func run(files []string) error {
	module, err := modulePath("go.mod")
	if err != nil {
		return err
	}
	if len(files) == 0 {
		if files, err = goFiles("."); err != nil {
			return err
		}
	}
	found := false
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		problems, err := checkSource(name, src, module)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, p := range problems {
			fmt.Println(p)
			found = true
		}
	}
	if found {
		return errProblems
	}
	return nil
}

// modulePath reads the module line of a go.mod file.
func modulePath(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", fmt.Errorf("reading the module path: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s has no module line", gomod)
}

// goFiles lists the .go files under root the go command would build.
func goFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}
