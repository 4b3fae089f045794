package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/purerbd/purerbd/internal/cli"
	"github.com/purerbd/purerbd/rbd"
	"github.com/purerbd/purerbd/rbd/luks"
)

// `purerbd rbd encryption format`: a LUKS header at the start of an
// image, as `rbd encryption format` writes it, and the options that
// open an encrypted image for serving (rbd-nbd's --encryption-format and
// --encryption-passphrase-file).

func (c *rbdCommand) encryptionCommand() *cli.Command {
	var cipher string
	format := &cli.Command{
		Name: "format", Summary: "format an image as LUKS1 or LUKS2 (rbd encryption format)",
		Args: "IMAGE FORMAT PASSPHRASE_FILE", MinArgs: 3, MaxArgs: 3,
		Help: `Writes a LUKS header with one keyslot for the passphrase in PASSPHRASE_FILE
(its whole content) at the start of IMAGE, as rbd encryption format does:
FORMAT is luks1 or luks2, the data area starts at a multiple of the stripe
period (the object size), and the image's plaintext is that much smaller.
Data already in the image becomes unreadable. A clone is formatted as
Ceph 17 and later format it: a key of its own, with the clone magic in
its header; its data still shared with its parent reads through the
parent's encryption, so it is opened with a spec for itself and then for
each ancestor (--encryption-format and --encryption-passphrase-file
repeated, the clone's first).`,
		Run: func(ctx context.Context, inv *cli.Invocation) error {
			version, err := luksVersion(inv.Args[1], false)
			if err != nil {
				return err
			}
			pass, err := readPassphraseFile(inv.Args[2])
			if err != nil {
				return err
			}
			defer clear(pass)
			keySize := 64
			if cipher == "aes-128" {
				keySize = 32
			}
			sp, err := c.parseSpec(inv.Args[0], false)
			if err != nil {
				return err
			}
			return c.withImage(ctx, sp, rbd.OpenOptions{}, func(img *rbd.Image) error {
				st, err := img.Stat(ctx)
				if err != nil {
					return err
				}
				// librbd aligns the data offset to the stripe period (and
				// pads a clone's header to it)
				period := int64(st.ObjectSize) * int64(max(st.StripeCount, 1))
				_, err = luks.FormatImage(ctx, img, pass, luks.FormatOptions{
					Version: version, KeySize: keySize, Alignment: period,
				})
				if err != nil {
					return err
				}
				return img.Flush(ctx)
			})
		},
	}
	format.Choice(&cipher, "--cipher-alg ALG", []string{"aes-128", "aes-256"}, "data cipher: AES-XTS with a 128- or 256-bit key (default aes-256)")
	group := &cli.Command{Name: "encryption", Summary: "encrypted images: format"}
	return group.Add(format)
}

// luksVersion maps rbd's encryption format names to a LUKS version: luks1
// and luks2, and with anyVersion luks (either, as the header says: 0).
func luksVersion(name string, anyVersion bool) (int, error) {
	switch name {
	case "luks1":
		return 1, nil
	case "luks2":
		return 2, nil
	case "luks":
		if anyVersion {
			return 0, nil
		}
	}
	if anyVersion {
		return 0, fmt.Errorf("encryption format %q: want luks1, luks2 or luks", name)
	}
	return 0, fmt.Errorf("encryption format %q: want luks1 or luks2", name)
}

// maxPassphrase bounds a passphrase file (cryptsetup's key file limit).
const maxPassphrase = 8 << 20

// readPassphraseFile returns a passphrase file's whole content, as rbd
// and qemu read it (a final newline is part of the passphrase).
func readPassphraseFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("passphrase file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPassphrase+1))
	if err != nil {
		return nil, fmt.Errorf("passphrase file %s: %w", path, err)
	}
	if len(b) > maxPassphrase {
		return nil, fmt.Errorf("passphrase file %s: longer than %d bytes", path, maxPassphrase)
	}
	if len(b) == 0 {
		return nil, errors.New("passphrase file " + path + " is empty")
	}
	return b, nil
}

// encryptionFlags open an image's LUKS encryption, with rbd's and
// rbd-nbd's option names: --encryption-format and
// --encryption-passphrase-file, each repeatable, one pair a layer, the
// image's first and then its parent's, its grandparent's, and so on (a
// clone formatted with a key of its own needs its ancestors' too). As
// rbd and rbd-nbd count them: passphrase files without any format are
// all luks (either version), and otherwise the counts must match.
type encryptionFlags struct {
	formats, passphraseFiles []string
}

func (f *encryptionFlags) register(c *cli.Command) {
	c.Strings(&f.formats, "--encryption-format FORMAT", "serve the plaintext of a LUKS-encrypted image: luks1, luks2 or luks (either); repeated for a clone's ancestors, the image's first")
	c.Strings(&f.passphraseFiles, "--encryption-passphrase-file PATH", "the passphrase, the file's whole content; repeated, one for each --encryption-format")
}

// given reports whether any encryption option was given.
func (f *encryptionFlags) given() bool {
	return len(f.formats) > 0 || len(f.passphraseFiles) > 0
}

// check refuses unknown formats and counts that do not match.
func (f *encryptionFlags) check() error {
	for _, name := range f.formats {
		if _, err := luksVersion(name, true); err != nil {
			return err
		}
	}
	if len(f.formats) > 0 && len(f.formats) != len(f.passphraseFiles) {
		return fmt.Errorf("encryption formats count (%d) does not match passphrase files count (%d)", len(f.formats), len(f.passphraseFiles))
	}
	return nil
}

// specs reads the passphrase files into one spec a layer (nil without
// the options); clear them when done.
func (f *encryptionFlags) specs() ([]luks.Spec, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	var specs []luks.Spec
	for i, path := range f.passphraseFiles {
		version := 0
		if len(f.formats) > 0 {
			version, _ = luksVersion(f.formats[i], true)
		}
		pass, err := readPassphraseFile(path)
		if err != nil {
			clearSpecs(specs)
			return nil, err
		}
		specs = append(specs, luks.Spec{Version: version, Passphrase: pass})
	}
	return specs, nil
}

func clearSpecs(specs []luks.Spec) {
	for _, s := range specs {
		clear(s.Passphrase)
	}
}

// open wraps img in its LUKS encryption (and its ancestors'), unlocked
// with the passphrase files; without the options it returns nil.
func (f *encryptionFlags) open(ctx context.Context, img luks.Device) (*luks.Image, error) {
	specs, err := f.specs()
	if err != nil || specs == nil {
		return nil, err
	}
	defer clearSpecs(specs)
	enc, err := luks.OpenLayers(ctx, img, specs)
	if err != nil {
		return nil, fmt.Errorf("loading encryption: %w", err)
	}
	return enc, nil
}
