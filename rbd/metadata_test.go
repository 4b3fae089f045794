package rbd

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
)

// TestMetadataByID reads and writes image metadata by image id, without
// opening the image, with rbd image-meta as the oracle.
func TestMetadataByID(t *testing.T) {
	ctx := ctxT(t)
	name := imageName(t)
	spec := "rbd/" + name
	if err := Create(ctx, testPool(t), name, 1<<20, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id, err := ImageID(ctx, testPool(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := MetadataSet(ctx, testPool(t), id, "purerbd.owner", "alice bob"); err != nil {
		t.Fatal(err)
	}
	if v := strings.TrimSpace(string(rbdCLI(t, "image-meta", "get", spec, "purerbd.owner"))); v != "alice bob" {
		t.Errorf("rbd image-meta get: %q", v)
	}
	rbdCLI(t, "image-meta", "set", spec, "conf_rbd_cache", "false")
	if v, err := MetadataGet(ctx, testPool(t), id, "conf_rbd_cache"); err != nil || v != "false" {
		t.Errorf("MetadataGet of rbd's key: %q %v", v, err)
	}
	if _, err := MetadataGet(ctx, testPool(t), id, "unset"); !errors.Is(err, ErrNotFound) {
		t.Errorf("MetadataGet of an unset key: %v", err)
	}

	var rbdList map[string]string
	if err := json.Unmarshal(rbdCLI(t, "image-meta", "list", "--format", "json", spec), &rbdList); err != nil {
		t.Fatal(err)
	}
	list, err := MetadataList(ctx, testPool(t), id)
	if err != nil || !maps.Equal(list, rbdList) || len(list) != 2 {
		t.Errorf("MetadataList = %v, %v; rbd image-meta list says %v", list, err, rbdList)
	}
	img := openT(t, name, OpenOptions{ReadOnly: true})
	if list, err := img.MetadataList(ctx); err != nil || !maps.Equal(list, rbdList) {
		t.Errorf("Image.MetadataList = %v, %v; rbd image-meta list says %v", list, err, rbdList)
	}

	if err := MetadataRemove(ctx, testPool(t), id, "purerbd.owner"); err != nil {
		t.Fatal(err)
	}
	if out, err := cluster.Rbd(ctx, "image-meta", "get", spec, "purerbd.owner"); err == nil {
		t.Errorf("rbd image-meta get of a removed key: %s", out)
	}
	if err := MetadataRemove(ctx, testPool(t), id, "purerbd.owner"); err != nil {
		t.Errorf("removing a removed key: %v", err)
	}
	if err := MetadataSet(ctx, testPool(t), id, "", "x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty key: %v", err)
	}

	// An image that is gone: nothing is written for it.
	const gone = "0123456789abcd"
	if err := MetadataSet(ctx, testPool(t), gone, "k", "v"); !errors.Is(err, ErrNotFound) {
		t.Errorf("MetadataSet of a missing image: %v", err)
	}
	if out, err := cluster.Rados(ctx, "-p", "rbd", "stat", "rbd_header."+gone); err == nil {
		t.Errorf("MetadataSet of a missing image created its header: %s", out)
	}
	if _, err := MetadataList(ctx, testPool(t), gone); !errors.Is(err, ErrNotFound) {
		t.Errorf("MetadataList of a missing image: %v", err)
	}
	if _, err := MetadataGet(ctx, testPool(t), gone, "k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("MetadataGet of a missing image: %v", err)
	}
	if err := MetadataRemove(ctx, testPool(t), gone, "k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("MetadataRemove of a missing image: %v", err)
	}
	if out, err := cluster.Rados(ctx, "-p", "rbd", "stat", "rbd_header."+gone); err == nil {
		t.Errorf("MetadataRemove of a missing image created its header: %s", out)
	}
}
