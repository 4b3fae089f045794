package images

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// archive is what a docker-archive tar holds, as the tests read it.
type archive struct {
	RepoTags []string
	Config   struct {
		Entrypoint []string
		Cmd        []string
		Env        []string
		User       string
	}
}

// readArchive reads the manifest and image config of the docker-archive
// tar at path and unpacks its layers into rootfs.
func readArchive(path, rootfs string) (archive, error) {
	var a archive
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	files := map[string][]byte{}
	if err := walkTar(path, func(h *tar.Header, r io.Reader) error {
		if h.Name == "manifest.json" || filepath.Ext(h.Name) == ".json" {
			b, err := io.ReadAll(r)
			files[h.Name] = b
			return err
		}
		return nil
	}); err != nil {
		return a, err
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		return a, fmt.Errorf("manifest.json: %w", err)
	}
	if len(manifest) != 1 {
		return a, fmt.Errorf("manifest.json lists %d images, want 1", len(manifest))
	}
	a.RepoTags = manifest[0].RepoTags
	var config struct{ Config json.RawMessage }
	if err := json.Unmarshal(files[manifest[0].Config], &config); err != nil {
		return a, fmt.Errorf("config %s: %w", manifest[0].Config, err)
	}
	if err := json.Unmarshal(config.Config, &a.Config); err != nil {
		return a, fmt.Errorf("config %s: %w", manifest[0].Config, err)
	}
	layers := map[string]bool{}
	for _, l := range manifest[0].Layers {
		layers[l] = true
	}
	err := walkTar(path, func(h *tar.Header, r io.Reader) error {
		if !layers[h.Name] {
			return nil
		}
		delete(layers, h.Name)
		return unpack(tar.NewReader(r), rootfs)
	})
	if err == nil && len(layers) > 0 {
		err = fmt.Errorf("layers missing from the archive: %v", layers)
	}
	return a, err
}

// walkTar calls fn on every entry of the tar file at path.
func walkTar(path string, fn func(*tar.Header, io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := fn(h, tr); err != nil {
			return fmt.Errorf("%s: %s: %w", path, h.Name, err)
		}
	}
}

// unpack extracts a layer's directories, files and symlinks into dir.
func unpack(tr *tar.Reader, dir string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("layer entry %q leaves the root", h.Name)
		}
		dst := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(dst, h.FileInfo().Mode()); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, dst); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, h.FileInfo().Mode().Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("layer entry %q of type %c", h.Name, h.Typeflag)
		}
	}
}
