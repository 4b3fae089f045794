package cephcluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Port leasing: mons need fixed ports written into the monmap before they
// start, and several test binaries boot clusters at the same time. A port
// is ours while we hold an exclusive flock on its lock file and nothing
// listens on it; the locks die with the process.
const (
	portBase  = 21300
	portLimit = 24300
)

type portLease struct {
	ports []int
	files []*os.File
}

func leasePorts(n int) (*portLease, error) {
	dir := filepath.Join(os.TempDir(), "purerbd-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("cephcluster: port lock dir: %w", err)
	}
	l := &portLease{}
	start := portBase + (os.Getpid()*7)%(portLimit-portBase)
	for i := 0; i < portLimit-portBase && len(l.ports) < n; i++ {
		p := portBase + (start-portBase+i)%(portLimit-portBase)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		if !portFree(p) {
			f.Close()
			continue
		}
		l.ports = append(l.ports, p)
		l.files = append(l.files, f)
	}
	if len(l.ports) < n {
		l.release()
		return nil, fmt.Errorf("cephcluster: no free ports in %d-%d", portBase, portLimit)
	}
	return l, nil
}

func portFree(p int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

func (l *portLease) release() {
	for _, f := range l.files {
		f.Close()
	}
	l.files = nil
}
