// Package loadgen is the purerbd side's load generator for the benchmark
// suite: a time-based, closed-loop workload (a fixed number of requests
// in flight, each worker issuing its next request when the previous one
// completes, as fio's iodepth does) against anything with context-taking
// ReadAt/WriteAt methods — an rbd.Image, or objects through a
// rados.IOContext — recording every completion latency in a log-linear
// histogram (1.6% resolution) and reporting fio-style percentiles.
package loadgen
