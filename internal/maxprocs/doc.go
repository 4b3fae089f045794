// Package maxprocs sizes the Go scheduler of a serving process to the CPU
// the process uses: GOMAXPROCS follows its load, between one and the
// runtime's default.
//
// Why. An NBD server's work per request is short and mostly system
// calls, passed between goroutines: the reader of the client's socket,
// the request's handler, the OSD connection's writer and reader, the
// reply writer. With more Ps than the load keeps busy, most of those
// hand-offs find a P idle and wake a thread for it (a futex wake, a
// context switch, a thread that spins looking for work and sleeps
// again). `perf record` of `purerbd-bench serve --image` under fio 4k
// random writes at queue depth 32 on 2 cores: 21% of the server's
// samples in finish_task_switch, 1.9 context switches and 2 epoll_pwait
// per request. With one P the hand-offs are run-queue operations on the
// same thread. By hand, 6 pairs of 3 s runs, same binary, one P against
// the default two: 12.2-16.5k against 11.3-15.0k writes/s, 26-33 against
// 35-49 µs of server CPU per write; the memory export at the same depth
// 142-166k against 128-150k writes/s.
//
// A process that needs more than one core still gets it: when the Ps
// are nearly always busy the count doubles at once (up to the default),
// and it comes down one at a time only after the load has stayed below
// what one P fewer would carry for a second.
//
// An explicit GOMAXPROCS in the environment is the operator's choice
// and is left alone.
package maxprocs
