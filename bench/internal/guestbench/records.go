package guestbench

import (
	"encoding/json"
	"fmt"
	"os"
)

// Console record prefixes.
const (
	PrefixSample = "SAMPLE "
	PrefixNode   = "NODE "
	PrefixNote   = "NOTE "
	PrefixResult = "RESULT "
	PrefixClock  = "CLOCK "
	PrefixMark   = "MARK "
)

// MarkRecord brackets one run on the console, before its first reading
// and after its last, so that the host can read its own CPU around it
// as the console brings the marks.
type MarkRecord struct {
	Event     string `json:"event"` // MarkStart or MarkEnd
	Group     string `json:"group"`
	Case      string `json:"case"`
	Contender string `json:"contender"`
	Rep       int    `json:"rep"`
}

// MarkRecord events.
const (
	MarkStart = "start"
	MarkEnd   = "end"
)

// RunKey names one run of one contender on one case: the key that ties
// a SampleRecord to its MarkRecords.
func RunKey(group, caseName, contender string, rep int) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%d", group, caseName, contender, rep)
}

// SampleRecord is one run of one contender on one I/O case.
type SampleRecord struct {
	Group     string  `json:"group"`     // "memory" or "rbd"
	Case      string  `json:"case"`      // "4k randread QD32"
	Unit      string  `json:"unit"`      // "IOPS" or "MiB/s"
	Contender string  `json:"contender"` // "purerbd", "nbdkit", "krbd"
	Rep       int     `json:"rep"`
	Value     float64 `json:"value"`
	Ops       int64   `json:"ops"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	// CPU is the serving process's CPU seconds over the run; -1 when the
	// server is the kernel (krbd) or unknown.
	CPU float64 `json:"cpu_s"`
	// RSS is the serving process's peak RSS (VmHWM) in bytes, 0 unknown.
	RSS    int64   `json:"rss"`
	MeanNs float64 `json:"mean_ns"`
	P50Ns  float64 `json:"p50_ns"`
	P99Ns  float64 `json:"p99_ns"`
	P999Ns float64 `json:"p999_ns"`
	// GuestCPU is the busy time of all the guest's CPUs over the run, in
	// seconds, and Switches the context switches all of them made: every
	// process and kernel worker that served the run, krbd's too. -1 when
	// /proc/stat could not be read.
	GuestCPU float64 `json:"guest_cpu_s"`
	Switches int64   `json:"ctxt"`
	// ServerSwitches is how many times the serving process's threads
	// were switched out over the run (voluntary and not, all its
	// threads); -1 when the server is the kernel or unknown.
	ServerSwitches int64 `json:"server_ctxt"`
	// ServerVoluntary is the part of ServerSwitches where a thread
	// waited (the rest were preemptions), ServerBusiestThread the
	// switches of the thread that made the most, and ServerThreads how
	// many threads made any; -1 as ServerSwitches.
	ServerVoluntary     int64 `json:"server_ctxt_vol"`
	ServerBusiestThread int64 `json:"server_ctxt_busiest"`
	ServerThreads       int   `json:"server_threads"`
}

// NodeRecord is what the node plugin cost: the time of each
// NodeStageVolume and NodeUnstageVolume, and its memory at each step.
type NodeRecord struct {
	Volumes    int       `json:"volumes"`
	StageS     []float64 `json:"stage_s"`
	UnstageS   []float64 `json:"unstage_s"`
	Memory     []NodeMem `json:"memory"`
	StartS     float64   `json:"start_s"`
	VolumeSize int64     `json:"volume_size"`
	FsType     string    `json:"fs_type"`
}

// NodeMem is the plugin process's memory at one step.
type NodeMem struct {
	Step     string `json:"step"` // "started", "1 staged", "10 staged", "10 staged, after I/O"...
	Attached int    `json:"attached"`
	RSS      int64  `json:"rss"` // VmRSS
	HWM      int64  `json:"hwm"` // VmHWM
	// The Go runtime's account of the same moment, from the plugin's
	// metrics endpoint (0: not scraped): heap spans in use, heap spans
	// free but not returned to the kernel (idle minus released), and
	// goroutine stacks.
	HeapInuse int64 `json:"heap_inuse,omitempty"`
	HeapKept  int64 `json:"heap_kept,omitempty"`
	Stacks    int64 `json:"stacks,omitempty"`
}

// emit prints one record line.
func emit(prefix string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(os.Stdout, "%s{\"error\":%q}\n", prefix, err.Error())
		return
	}
	fmt.Fprintf(os.Stdout, "%s%s\n", prefix, b)
}

// note prints a NOTE line.
func note(format string, a ...any) {
	fmt.Fprintf(os.Stdout, "%s%s\n", PrefixNote, fmt.Sprintf(format, a...))
}
