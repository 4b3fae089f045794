// Package hugebuf allocates large I/O buffers outside the Go heap, in
// memory the kernel may back with transparent huge pages.
//
// A read from a socket ends in the kernel copying into the reader's
// buffer, and that copy pays a TLB miss for every 4 KiB page it writes
// when the buffer was last touched long ago: a program that keeps many
// large buffers in rotation (one per request in flight) writes each one
// only once per rotation. Backed by 2 MiB pages, a buffer costs the
// copy one TLB entry per 2 MiB instead. Where huge pages are not to be
// had (another system, THP off, mmap refused), Alloc falls back to the
// Go heap; the memory works the same either way.
package hugebuf
