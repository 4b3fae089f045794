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
// thread that spins looking for work and sleeps again. `perf record` of
// `purerbd-bench serve --image` under fio 4k random writes at queue
// depth 32 on 2 cores: 21% of the server's samples in
// finish_task_switch, 1.9 context switches and 2 epoll_pwait per
// request. With one P the hand-offs are run-queue operations on one
// thread: 0.08 context switches and 0.2 epoll_pwait per request.
//
// By hand, same binary, one P against the default two:
//   - RBD export, one connection, 4k randwrite QD32, 6 pairs of 3 s:
//     12.2-16.5k against 11.3-15.0k writes/s, 26-33 against 35-49 µs
//     of server CPU per write; randread and 1M writes unchanged;
//   - memory export, one connection, 4k randwrite QD32, 4 pairs:
//     142-166k against 128-150k writes/s;
//   - memory export, four connections (fio numjobs=4), 3 pairs:
//     127-140k against 157-183k writes/s: there two Ps win.
//
// Neither of the process's own signals tells these apart: its CPU use
// saturates one P in the second case (where a second P only adds
// wake-ups) and not in the third, and the runtime's scheduling latency
// (/sched/latencies:seconds) is longer in the first (bursts of handlers
// readied by one batch of OSD replies) than in the third. The number of
// streams does, so the server reports it.
//
// An explicit GOMAXPROCS in the environment is the operator's choice
// and is left alone.
package maxprocs
