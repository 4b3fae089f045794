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
// Nothing here logs or wraps a passphrase or a key into an error.
package luks
