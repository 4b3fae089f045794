// Package maxprocs sizes the Go scheduler of a serving process to the
// independent streams of work it serves: GOMAXPROCS follows a demand the
// process reports (an NBD server's connections), between one and the
// runtime's default.
//
// Why. An NBD connection is served by a chain of goroutines: the reader
// of the client's socket, the requests' handlers, the OSD connections'
// writers and readers, the reply writer. Each request passes through
// five of them, and the work of each step is short and mostly system
// calls. With more Ps than streams, most of those hand-offs find a P
// idle and wake a thread for it: a futex wake, a context switch, a
// thread that spins looking for work and sleeps again. With as many Ps
// as streams the hand-offs are run-queue operations on one thread. More
// streams than one (several connections) do gain from more Ps.
//
// Neither the process's CPU use nor the runtime's scheduling latency
// tells these cases apart; the number of streams does, so the server
// reports it.
//
// An explicit GOMAXPROCS in the environment is the operator's choice
// and is left alone.
package maxprocs
