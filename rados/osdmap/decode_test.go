package osdmap

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/purerbd/purerbd/rados/denc"
	"github.com/purerbd/purerbd/rados/radostest/corpus"
)

func sampleName(path string) string {
	return filepath.Base(filepath.Dir(filepath.Dir(path))) + "/" + filepath.Base(path)
}

func TestDecodeCorpusOSDMap(t *testing.T) {
	for _, path := range corpus.Files(t, "OSDMap") {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Decode(raw)
		if err != nil {
			t.Errorf("%s: %v", sampleName(path), err)
			continue
		}
		dump := osdmaptoolDump(t, path)
		if dump == nil {
			t.Logf("%s: decoded (client v%d, osd v%d); Pacific's osdmaptool cannot read it to compare",
				sampleName(path), m.ClientVersion, m.OSDVersion)
			continue
		}
		for _, diff := range compareMapWithDump(m, dump) {
			t.Errorf("%s: %s", sampleName(path), diff)
		}
	}
}

func TestDecodeCorpusPool(t *testing.T) {
	for _, path := range corpus.Files(t, "pg_pool_t") {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodePool(raw); err != nil {
			t.Errorf("%s: %v", sampleName(path), err)
		}
	}
}

func TestDecodeCorpusIncremental(t *testing.T) {
	for _, path := range corpus.Files(t, "OSDMap__Incremental") {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		inc, err := DecodeIncremental(raw)
		if err != nil {
			t.Errorf("%s: %v", sampleName(path), err)
			continue
		}
		if len(inc.FullMap) > 0 {
			if _, err := Decode(inc.FullMap); err != nil {
				t.Errorf("%s: embedded full map: %v", sampleName(path), err)
			}
		}
	}
}

func TestDecodeCorpusOSDInfo(t *testing.T) {
	for _, typ := range []string{"osd_info_t", "osd_xinfo_t"} {
		for _, path := range corpus.Files(t, typ) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			d := denc.NewDecoder(raw)
			if typ == "osd_info_t" {
				var i OSDInfo
				i.Decode(d)
			} else {
				var x OSDXInfo
				x.Decode(d)
			}
			d.End("trailing bytes")
			if err := d.Err(); err != nil {
				t.Errorf("%s: %v", sampleName(path), err)
			}
		}
	}
}
