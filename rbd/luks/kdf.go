package luks

import (
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"runtime/debug"

	"golang.org/x/crypto/argon2"
)

// hashByName returns the hash LUKS names (cryptsetup's names, the ones
// rbd and cryptsetup write); ripemd160, whirlpool and others are not
// offered.
func hashByName(name string) (func() hash.Hash, error) {
	switch name {
	case "sha1":
		return sha1.New, nil
	case "sha256":
		return sha256.New, nil
	case "sha512":
		return sha512.New, nil
	}
	return nil, fmt.Errorf("%w: hash %q", ErrUnsupported, name)
}

// Bounds on a header's KDF costs, so that a hostile header cannot make
// an unlock allocate or spin without limit: cryptsetup itself writes at
// most 4 GiB of memory (its own maximum) and 2^32-1 iterations.
const (
	maxArgonMemoryKiB = 4 << 20
	maxArgonTime      = 1 << 16
	maxArgonCPUs      = 255
)

// derive runs a keyslot's KDF over the passphrase for a key of n bytes.
func (k KDF) derive(passphrase []byte, n int) ([]byte, error) {
	switch k.Type {
	case "pbkdf2":
		h, err := hashByName(k.Hash)
		if err != nil {
			return nil, err
		}
		if k.Iterations <= 0 {
			return nil, fmt.Errorf("%w: pbkdf2 with %d iterations", ErrCorrupt, k.Iterations)
		}
		return pbkdf2.Key(h, string(passphrase), k.Salt, k.Iterations, n)
	case "argon2i", "argon2id":
		if k.Time <= 0 || k.Time > maxArgonTime || k.Memory <= 0 || k.Memory > maxArgonMemoryKiB ||
			k.CPUs <= 0 || k.CPUs > maxArgonCPUs {
			return nil, fmt.Errorf("%w: %s cost time %d, memory %d KiB, %d cpus", ErrUnsupported, k.Type, k.Time, k.Memory, k.CPUs)
		}
		var key []byte
		if k.Type == "argon2i" {
			key = argon2.Key(passphrase, k.Salt, uint32(k.Time), uint32(k.Memory), uint8(k.CPUs), uint32(n))
		} else {
			key = argon2.IDKey(passphrase, k.Salt, uint32(k.Time), uint32(k.Memory), uint8(k.CPUs), uint32(n))
		}
		// Argon2's memory (k.Memory KiB: 32 MiB as ceph-csi formats, up
		// to 1 GiB as cryptsetup and rbd format on a large machine) is
		// garbage now, but the heap keeps it until a collection, which
		// nothing may trigger for minutes, and the runtime returns freed
		// pages to the OS only gradually after that: a node plugin or an
		// NBD server would stay that much larger after every unlock.
		// Hand it back at once; one collection is small beside the KDF.
		debug.FreeOSMemory()
		return key, nil
	}
	return nil, fmt.Errorf("%w: KDF %q", ErrUnsupported, k.Type)
}
