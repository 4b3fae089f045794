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
FORMAT is luks1 or luks2, the data area starts at a multiple of the object
size, and the image's plaintext is that much smaller. Data already in the
image becomes unreadable.`,
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
				_, err = luks.FormatImage(ctx, img, pass, luks.FormatOptions{
					Version: version, KeySize: keySize, Alignment: int64(st.ObjectSize),
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

// encryptionFlags open an image's LUKS encryption for serving, with
// rbd-nbd's option names.
type encryptionFlags struct {
	format, passphraseFile string
}

func (f *encryptionFlags) register(c *cli.Command) {
	c.Choice(&f.format, "--encryption-format FORMAT", []string{"luks1", "luks2", "luks"}, "with --image: serve the plaintext of a LUKS-encrypted image (luks: either version)")
	c.String(&f.passphraseFile, "--encryption-passphrase-file PATH", "with --encryption-format: the passphrase, the file's whole content")
}

// check reports options given without the other.
func (f *encryptionFlags) check() error {
	if (f.format == "") != (f.passphraseFile == "") {
		return errors.New("--encryption-format and --encryption-passphrase-file go together")
	}
	return nil
}

// open wraps img in its LUKS encryption, unlocked with the passphrase
// file; without the options it returns nil.
func (f *encryptionFlags) open(ctx context.Context, img luks.Device) (*luks.Image, error) {
	if f.format == "" {
		return nil, nil
	}
	version, err := luksVersion(f.format, true)
	if err != nil {
		return nil, err
	}
	pass, err := readPassphraseFile(f.passphraseFile)
	if err != nil {
		return nil, err
	}
	defer clear(pass)
	enc, err := luks.Open(ctx, img, pass, version)
	if err != nil {
		return nil, fmt.Errorf("loading encryption: %w", err)
	}
	return enc, nil
}
