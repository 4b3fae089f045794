package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rados/monc"
)

// `purerbd status`: what the monitors say about the cluster: fsid,
// health, the monitors and their quorum, the OSDs, the pools.

// clusterStatus is the report `purerbd status` prints.
type clusterStatus struct {
	FSID   string `json:"fsid"`
	Health string `json:"health"`
	MonMap struct {
		Epoch uint32       `json:"epoch"`
		Mons  []monSummary `json:"mons"`
	} `json:"monmap"`
	Quorum       []string      `json:"quorum_names"`
	QuorumLeader string        `json:"quorum_leader_name"`
	OSDMap       osdMapSummary `json:"osdmap"`
	Pools        []poolSummary `json:"pools"`
}

type monSummary struct {
	Rank  int    `json:"rank"`
	Name  string `json:"name"`
	Addrs string `json:"public_addrs"`
}

type osdMapSummary struct {
	Epoch     uint32 `json:"epoch"`
	NumOSDs   int    `json:"num_osds"`
	NumUpOSDs int    `json:"num_up_osds"`
	NumInOSDs int    `json:"num_in_osds"`
}

type poolSummary struct {
	ID           int64    `json:"pool_id"`
	Name         string   `json:"pool_name"`
	Type         string   `json:"type"`
	Size         int      `json:"size"`
	MinSize      int      `json:"min_size"`
	PGNum        int      `json:"pg_num"`
	CrushRule    int      `json:"crush_rule"`
	Applications []string `json:"applications"`
}

func statusCommand(g *globals) *cli.Command {
	format := "plain"
	c := &cli.Command{
		Name:    "status",
		Summary: "show the cluster's fsid, health, monitors, quorum, OSDs and pools",
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			return runStatus(ctx, g, format, inv.Stdout)
		},
	}
	c.Choice(&format, "-f, --format FORMAT", []string{"plain", "json", "json-pretty"}, "output format")
	return c
}

func runStatus(ctx context.Context, g *globals, format string, stdout io.Writer) error {
	mc, err := g.connectMon(ctx)
	if err != nil {
		return err
	}
	defer mc.Close()
	st, err := gatherStatus(ctx, mc)
	if err != nil {
		return err
	}
	switch format {
	case "json":
		return json.NewEncoder(stdout).Encode(st)
	case "json-pretty":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "    ")
		return enc.Encode(st)
	}
	return st.writeText(stdout)
}

// monJSON runs a mon command with JSON output and decodes it into v.
func monJSON(ctx context.Context, mc *monc.Client, v any, cmd map[string]any) error {
	cmd["format"] = "json"
	out, outs, err := mc.CommandJSON(ctx, cmd, nil)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, outs)
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("mon command %q: unexpected output: %w", cmd["prefix"], err)
	}
	return nil
}

// gatherStatus asks the monitors for the report: "status" (health and
// map summaries), "quorum_status" (the leader), "osd pool ls detail"
// (pools), and the client's own MonMap (the members).
func gatherStatus(ctx context.Context, mc *monc.Client) (*clusterStatus, error) {
	var status struct {
		FSID   string `json:"fsid"`
		Health struct {
			Status string `json:"status"`
		} `json:"health"`
		QuorumNames []string      `json:"quorum_names"`
		OSDMap      osdMapSummary `json:"osdmap"`
	}
	if err := monJSON(ctx, mc, &status, map[string]any{"prefix": "status"}); err != nil {
		return nil, err
	}
	var quorum struct {
		Leader string `json:"quorum_leader_name"`
	}
	if err := monJSON(ctx, mc, &quorum, map[string]any{"prefix": "quorum_status"}); err != nil {
		return nil, err
	}
	var pools []struct {
		ID      int64                      `json:"pool_id"`
		Name    string                     `json:"pool_name"`
		Type    int                        `json:"type"`
		Size    int                        `json:"size"`
		MinSize int                        `json:"min_size"`
		PGNum   int                        `json:"pg_num"`
		Rule    int                        `json:"crush_rule"`
		Apps    map[string]json.RawMessage `json:"application_metadata"`
	}
	if err := monJSON(ctx, mc, &pools, map[string]any{"prefix": "osd pool ls", "detail": "detail"}); err != nil {
		return nil, err
	}
	mm := mc.MonMap()
	if mm == nil {
		return nil, errors.New("no monmap")
	}
	st := &clusterStatus{
		FSID:         status.FSID,
		Health:       status.Health.Status,
		Quorum:       status.QuorumNames,
		QuorumLeader: quorum.Leader,
		OSDMap:       status.OSDMap,
		Pools:        []poolSummary{},
	}
	st.MonMap.Epoch = mm.Epoch
	for rank, mi := range mm.ByRank() {
		st.MonMap.Mons = append(st.MonMap.Mons, monSummary{Rank: rank, Name: mi.Name, Addrs: mi.Addrs.String()})
	}
	for _, p := range pools {
		ps := poolSummary{ID: p.ID, Name: p.Name, Type: poolTypeName(p.Type), Size: p.Size, MinSize: p.MinSize,
			PGNum: p.PGNum, CrushRule: p.Rule, Applications: []string{}}
		for app := range p.Apps {
			ps.Applications = append(ps.Applications, app)
		}
		sort.Strings(ps.Applications)
		st.Pools = append(st.Pools, ps)
	}
	return st, nil
}

// poolTypeName names pg_pool_t types.
func poolTypeName(t int) string {
	switch t {
	case 1:
		return "replicated"
	case 3:
		return "erasure"
	}
	return fmt.Sprintf("type %d", t)
}

// writeText prints the report for people.
func (st *clusterStatus) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "cluster:\t%s\n", st.FSID)
	fmt.Fprintf(tw, "health:\t%s\n", st.Health)
	fmt.Fprintf(tw, "monmap:\te%d, %d mons\n", st.MonMap.Epoch, len(st.MonMap.Mons))
	fmt.Fprintf(tw, "quorum:\t%s (leader %s)\n", strings.Join(st.Quorum, ","), st.QuorumLeader)
	for _, m := range st.MonMap.Mons {
		fmt.Fprintf(tw, "  mon.%s\trank %d\t%s\n", m.Name, m.Rank, m.Addrs)
	}
	o := st.OSDMap
	fmt.Fprintf(tw, "osdmap:\te%d, %d osds: %d up, %d in\n", o.Epoch, o.NumOSDs, o.NumUpOSDs, o.NumInOSDs)
	fmt.Fprintf(tw, "pools:\t%d\n", len(st.Pools))
	for _, p := range st.Pools {
		apps := strings.Join(p.Applications, ",")
		if apps == "" {
			apps = "-"
		}
		fmt.Fprintf(tw, "  %d %s\t%s size %d min_size %d pg_num %d crush_rule %d application %s\n",
			p.ID, p.Name, p.Type, p.Size, p.MinSize, p.PGNum, p.CrushRule, apps)
	}
	return tw.Flush()
}
