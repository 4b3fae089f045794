package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
)

// Object is one Kubernetes object as JSON.
type Object map[string]any

// Key is kind/namespace/name.
func (o Object) Key() string {
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	kind, _ := o["kind"].(string)
	return kind + "/" + ns + "/" + name
}

// DecodeObjects reads a stream of JSON objects, as `kubectl create
// --dry-run=client -o json` prints them, unpacking kind List.
func DecodeObjects(b []byte) ([]Object, error) {
	var out []Object
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var o Object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("objects: %w", err)
		}
		if o["kind"] == "List" {
			items, _ := o["items"].([]any)
			for _, it := range items {
				m, ok := it.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("objects: a List item is not an object")
				}
				out = append(out, Object(m))
			}
			continue
		}
		out = append(out, o)
	}
}

// helmOnlyMeta are the labels and annotations the Helm chart adds to
// what the plain manifests hold: the release's bookkeeping, and the
// checksums that roll the pods on a new config.
var helmOnlyMeta = []string{
	"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version", "helm.sh/chart",
	"checksum/config", "checksum/secret",
}

// StripHelmMeta removes helmOnlyMeta from an object's metadata and its
// pod template's, dropping maps left empty.
func StripHelmMeta(o Object) {
	strip := func(md map[string]any) {
		for _, f := range []string{"labels", "annotations"} {
			m, ok := md[f].(map[string]any)
			if !ok {
				continue
			}
			for _, k := range helmOnlyMeta {
				delete(m, k)
			}
			if len(m) == 0 {
				delete(md, f)
			}
		}
	}
	if md, ok := o["metadata"].(map[string]any); ok {
		strip(md)
	}
	if spec, ok := o["spec"].(map[string]any); ok {
		if tmpl, ok := spec["template"].(map[string]any); ok {
			if md, ok := tmpl["metadata"].(map[string]any); ok {
				strip(md)
			}
		}
	}
}

// CompareObjects checks that every object of a is in b, identical, and
// the reverse, except the kinds onlyA may have only in a and onlyB only
// in b. It returns one line per difference (at most a few paths per
// object).
func CompareObjects(a, b []Object, onlyA, onlyB []string) []string {
	index := func(l []Object) map[string]Object {
		m := map[string]Object{}
		for _, o := range l {
			m[o.Key()] = o
		}
		return m
	}
	ma, mb := index(a), index(b)
	allowed := func(kinds []string, key string) bool {
		kind, _, _ := strings.Cut(key, "/")
		for _, k := range kinds {
			if k == kind {
				return true
			}
		}
		return false
	}
	var diffs []string
	keys := make([]string, 0, len(ma)+len(mb))
	for k := range ma {
		keys = append(keys, k)
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		oa, inA := ma[k]
		ob, inB := mb[k]
		switch {
		case inA && !inB:
			if !allowed(onlyA, k) {
				diffs = append(diffs, k+": only in the first")
			}
		case inB && !inA:
			if !allowed(onlyB, k) {
				diffs = append(diffs, k+": only in the second")
			}
		default:
			var d []string
			diffValue(k, map[string]any(oa), map[string]any(ob), &d)
			if len(d) > 5 {
				d = append(d[:5], fmt.Sprintf("%s: … and %d more", k, len(d)-5))
			}
			diffs = append(diffs, d...)
		}
	}
	return diffs
}

// diffValue appends the paths where x and y differ.
func diffValue(path string, x, y any, out *[]string) {
	mx, okx := x.(map[string]any)
	my, oky := y.(map[string]any)
	if okx && oky {
		keys := map[string]bool{}
		for k := range mx {
			keys[k] = true
		}
		for k := range my {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diffValue(path+"."+k, mx[k], my[k], out)
		}
		return
	}
	lx, okx := x.([]any)
	ly, oky := y.([]any)
	if okx && oky && len(lx) == len(ly) {
		for i := range lx {
			diffValue(fmt.Sprintf("%s[%d]", path, i), lx[i], ly[i], out)
		}
		return
	}
	if !reflect.DeepEqual(x, y) {
		jx, _ := json.Marshal(x)
		jy, _ := json.Marshal(y)
		*out = append(*out, fmt.Sprintf("%s: %s ≠ %s", path, jx, jy))
	}
}

// SortNamedLists puts o's containers (of a pod template) and Service
// ports in name order: a kustomize patch prepends what it adds to a
// list where a chart's template appends it, which is the same object.
func SortNamedLists(o Object) {
	byName := func(l []any) {
		sort.SliceStable(l, func(i, j int) bool {
			a, _ := l[i].(map[string]any)
			b, _ := l[j].(map[string]any)
			an, _ := a["name"].(string)
			bn, _ := b["name"].(string)
			return an < bn
		})
	}
	spec, _ := o["spec"].(map[string]any)
	if ports, ok := spec["ports"].([]any); ok {
		byName(ports)
	}
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	for _, f := range []string{"containers", "volumes"} {
		if l, ok := pod[f].([]any); ok {
			byName(l)
		}
	}
	if cs, ok := pod["containers"].([]any); ok {
		for _, c := range cs {
			if m, ok := c.(map[string]any); ok {
				for _, f := range []string{"ports", "volumeMounts"} {
					if l, ok := m[f].([]any); ok {
						byName(l)
					}
				}
			}
		}
	}
}
