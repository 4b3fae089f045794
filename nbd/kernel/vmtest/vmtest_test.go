package vmtest

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/purerbd/purerbd/internal/shorttier"
)

// GNU cpio is the oracle for the archive format.
func TestArchiveReadByCpio(t *testing.T) {
	shorttier.Skip(t, "cpio")
	cpio, err := exec.LookPath("cpio")
	if err != nil {
		t.Fatalf("cpio not found: install the Debian package cpio (%v)", err)
	}
	a := newArchive()
	a.dir("dev")
	a.file("init", 0o755, []byte("#!/bin/sh\n"))
	a.file("lib/modules/6.1.0/kernel/drivers/block/nbd.ko", 0o644, bytes.Repeat([]byte{0xab}, 1001))
	a.file("/etc/empty", 0o600, nil)
	var buf bytes.Buffer
	if err := a.writeTo(&buf); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%4 != 0 {
		t.Errorf("archive length %d not padded", buf.Len())
	}
	dir := t.TempDir()
	cmd := exec.Command(cpio, "-idm", "--quiet")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v\n%s", err, out)
	}
	var got []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, rel+" "+fi.Mode().String())
		}
		return nil
	})
	sort.Strings(got)
	want := []string{
		"dev drwxr-xr-x", "etc drwxr-xr-x", "etc/empty -rw-------", "init -rwxr-xr-x",
		"lib drwxr-xr-x", "lib/modules drwxr-xr-x", "lib/modules/6.1.0 drwxr-xr-x",
		"lib/modules/6.1.0/kernel drwxr-xr-x", "lib/modules/6.1.0/kernel/drivers drwxr-xr-x",
		"lib/modules/6.1.0/kernel/drivers/block drwxr-xr-x",
		"lib/modules/6.1.0/kernel/drivers/block/nbd.ko -rw-r--r--",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("unpacked:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "lib/modules/6.1.0/kernel/drivers/block/nbd.ko")); !bytes.Equal(b, bytes.Repeat([]byte{0xab}, 1001)) {
		t.Error("file content changed")
	}
}

func TestAddModules(t *testing.T) {
	root := t.TempDir()
	h := Host{Release: "6.1.0-test", ModulesDir: filepath.Join(root, "6.1.0-test")}
	files := map[string]string{
		"modules.dep": "kernel/fs/mbcache.ko:\n" +
			"kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko\n" +
			"kernel/fs/jbd2/jbd2.ko:\n" +
			"kernel/drivers/block/nbd.ko:\n" +
			"kernel/lib/crc16.ko:\n" +
			"kernel/fs/xfs/xfs.ko: kernel/lib/libcrc32c.ko\n",
		"modules.builtin":             "kernel/fs/binfmt_script.ko\n",
		"kernel/fs/mbcache.ko":        "m",
		"kernel/fs/ext4/ext4.ko":      "e",
		"kernel/fs/jbd2/jbd2.ko":      "j",
		"kernel/drivers/block/nbd.ko": "n",
		"kernel/lib/crc16.ko":         "c",
	}
	for p, s := range files {
		p = filepath.Join(h.ModulesDir, p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(s), 0o644)
	}
	a := newArchive()
	// binfmt_script is built in: asking for it adds nothing
	if err := addModules(a, h, []string{"ext4", "nbd.ko", "binfmt_script"}, false); err != nil {
		t.Fatal(err)
	}
	dep := string(a.entries["lib/modules/6.1.0-test/modules.dep"].data)
	want := "kernel/fs/mbcache.ko:\n" +
		"kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko\n" +
		"kernel/fs/jbd2/jbd2.ko:\n" +
		"kernel/drivers/block/nbd.ko:\n" +
		"kernel/lib/crc16.ko:\n"
	if dep != want {
		t.Errorf("modules.dep:\n%s\nwant:\n%s", dep, want)
	}
	for _, p := range []string{"kernel/fs/ext4/ext4.ko", "kernel/lib/crc16.ko", "kernel/drivers/block/nbd.ko", "modules.builtin", "modules.alias"} {
		if _, ok := a.entries["lib/modules/6.1.0-test/"+p]; !ok {
			t.Errorf("%s missing", p)
		}
	}
	if _, ok := a.entries["lib/modules/6.1.0-test/kernel/fs/xfs/xfs.ko"]; ok {
		t.Error("xfs included unasked")
	}
	if err := addModules(newArchive(), h, []string{"btrfs"}, false); err == nil {
		t.Error("unknown module accepted")
	}

	// compressed: .ko.xz in the archive and in modules.dep, and it
	// decompresses to the file it was
	a = newArchive()
	if err := addModules(a, h, []string{"ext4"}, true); err != nil {
		t.Fatal(err)
	}
	dep = string(a.entries["lib/modules/6.1.0-test/modules.dep"].data)
	want = "kernel/fs/mbcache.ko.xz:\n" +
		"kernel/fs/ext4/ext4.ko.xz: kernel/lib/crc16.ko.xz kernel/fs/mbcache.ko.xz kernel/fs/jbd2/jbd2.ko.xz\n" +
		"kernel/fs/jbd2/jbd2.ko.xz:\n" +
		"kernel/lib/crc16.ko.xz:\n"
	if dep != want {
		t.Errorf("compressed modules.dep:\n%s\nwant:\n%s", dep, want)
	}
	zr, err := xz.NewReader(bytes.NewReader(a.entries["lib/modules/6.1.0-test/kernel/fs/ext4/ext4.ko.xz"].data))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(zr); err != nil || string(b) != "e" {
		t.Errorf("ext4.ko.xz holds %q, %v", b, err)
	}
}

// A dynamically linked host program comes with its loader and libraries.
func TestAddProgram(t *testing.T) {
	a := newArchive()
	if err := addProgram(a, "/bin/sh"); err != nil {
		t.Fatal(err)
	}
	var libc, loader bool
	for p, e := range a.entries {
		libc = libc || strings.HasSuffix(p, "/libc.so.6") && e.mode&modeFile != 0
		loader = loader || strings.Contains(p, "ld-linux") && e.mode&0o111 != 0
	}
	if !libc || !loader {
		t.Errorf("libc %v loader %v in %d entries", libc, loader, len(a.entries))
	}
}

// The command survives the shell's quoting, whatever it holds.
func TestInitScriptQuotesTheCommand(t *testing.T) {
	args := []string{"/bin/echo", "it's", "a b", `"q"`, "$HOME", "`x`"}
	s := initScript(args, nil, false)
	var line string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "'/bin/echo'") {
			line = strings.TrimSuffix(l, " </dev/null 2>&1")
		}
	}
	if line == "" {
		t.Fatalf("command line not found in\n%s", s)
	}
	out, err := exec.Command("/bin/sh", "-c", "printf '%s\\n' "+strings.TrimPrefix(line, "'/bin/echo' ")).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); strings.Join(got, "|") != strings.Join(args[1:], "|") {
		t.Errorf("arguments became %q", got)
	}
}

func TestVersionLess(t *testing.T) {
	l := []string{"vmlinuz-6.1.0-9-amd64", "vmlinuz-6.1.0-57-amd64", "vmlinuz-5.10.0-30-amd64", "vmlinuz-6.12.1-amd64"}
	sort.Slice(l, func(i, j int) bool { return versionLess(l[i], l[j]) })
	want := "vmlinuz-5.10.0-30-amd64 vmlinuz-6.1.0-9-amd64 vmlinuz-6.1.0-57-amd64 vmlinuz-6.12.1-amd64"
	if strings.Join(l, " ") != want {
		t.Errorf("order %v", l)
	}
}

func TestResultLines(t *testing.T) {
	r := &Result{Console: "a\nRESULT ok {}\nRESULT x\nb RESULT y\n"}
	if l := r.Lines("RESULT "); len(l) != 2 || l[0] != "ok {}" || l[1] != "x" {
		t.Errorf("%q", l)
	}
}

func TestResultScenario(t *testing.T) {
	ok := &Result{Console: "boot\nRESULT ok {\"timings_s\":{\"mount\":1.5},\"facts\":{\"conns\":4}}\nvmtest: exit=0\n"}
	sc, err := ok.Scenario()
	if err != nil {
		t.Fatal(err)
	}
	if sc.Timings["mount"] != 1.5 || sc.Facts["conns"] != float64(4) {
		t.Errorf("decoded %+v", sc)
	}
	for name, console := range map[string]string{
		"none":     "boot\nvmtest: exit=1\n",
		"fail":     "RESULT fail mount: EIO\n",
		"two":      "RESULT ok {}\nRESULT ok {}\n",
		"bad json": "RESULT ok {\"timings_s\":\n",
	} {
		if sc, err := (&Result{Console: console}).Scenario(); err == nil {
			t.Errorf("%s: accepted as %+v", name, sc)
		}
	}
}
