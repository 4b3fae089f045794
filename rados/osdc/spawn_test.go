package osdc

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purerbd/purerbd/rados/auth"
)

// unusedAuth satisfies Config.Auth for an objecter that never opens a
// session.
type unusedAuth struct{ auth.Provider }

// TestSpawnDuringClose starts background work from goroutines Close
// does not wait for (as Watch, Notify and a caller's request do) while
// Close runs. Every spawn either runs its function or reports that it
// did not; Close returns only after what ran has finished; a spawn after
// Close refuses. Under -race this also exercises the ordering spawn
// exists for (a WaitGroup count raised from zero beside Close's Wait is
// a reported race), though that window is too narrow to hit on demand:
// CI saw it once, from a watch whose re-registration started while its
// objecter closed.
func TestSpawnDuringClose(t *testing.T) {
	checkGoroutines(t)
	for round := range 50 {
		o, err := New(Config{Auth: unusedAuth{}})
		if err != nil {
			t.Fatal(err)
		}
		var started, finished sync.WaitGroup
		var closeReturned, late atomic.Bool
		for range 2 {
			started.Add(1)
			finished.Add(1)
			go func() {
				defer finished.Done()
				started.Done()
				for {
					// Each spawn waits for the last one's function, so the
					// count rises from zero every time, as a caller's
					// request on an idle objecter does.
					fnDone := make(chan struct{})
					ok := o.spawn(func() {
						defer close(fnDone)
						time.Sleep(20 * time.Microsecond)
						if closeReturned.Load() {
							late.Store(true)
						}
					})
					if !ok {
						return
					}
					<-fnDone
				}
			}()
		}
		started.Wait()
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		closeReturned.Store(true)
		finished.Wait()
		if late.Load() {
			t.Fatalf("round %d: a spawned function was still running when Close returned", round)
		}
		if o.spawn(func() { late.Store(true) }) || late.Load() {
			t.Fatalf("round %d: spawn after Close started its function", round)
		}
	}
}
