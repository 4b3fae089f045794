// Package luks reads and writes LUKS1 and LUKS2 encrypted RBD images the
// way librbd does (rbd encryption format, rbd-nbd and qemu's
// encrypt.format options): the LUKS header and keyslots fill the start of
// the image up to the data offset, which librbd aligns to the object size,
// and the data after it is AES-XTS (aes-xts-plain64) in sectors of 512
// bytes (LUKS1) or 4096 bytes (LUKS2 as librbd formats it), each sector's
// tweak being its offset from the start of the data area in 512-byte units.
//
// Parse decodes a header, Header.Unlock turns a passphrase into the volume
// key through a keyslot (PBKDF2 or Argon2, anti-forensic merge, digest
// check), Format writes a header with one keyslot, and Open wraps an
// image so that reads and writes are of plaintext at offsets from the data
// area's start.
//
// OpenLayers opens a clone formatted with a key of its own (Ceph 17 and
// later) with one Spec a layer, the clone's first: the data it still
// shares with its parent is read through the parent's encryption and
// copied up under its own (layers.go, parentview.go); FormatImage writes
// a clone's header with librbd's clone magic (magic.go), and
// Image.Flatten puts the LUKS magic back (flatten.go).
//
// An Argon2 keyslot's memory (as much as its header says, up to the
// 1 GiB cryptsetup picks on a large machine) is the KDF's for the seconds
// it runs; every call that runs one (Unlock, Open, OpenLayers and the
// formats) then hands it back to the OS with debug.FreeOSMemory, a
// collection of the whole process, rather than keep it resident.
//
// Nothing here logs or wraps a passphrase or a key into an error.
package luks
