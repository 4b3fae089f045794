package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/purerbd/purerbd/rbd/luks"
)

// Encrypted volumes, as ceph-csi makes them with its default KMS
// (`encrypted: "true"`, no encryptionKMSID, encryptionType block):
//
//   - CreateVolume marks the image (metaEncrypted = encryptionPrepared);
//     as with ceph-csi before 3.15, the header takes its room from the
//     capacity, so the plaintext is 16 MiB smaller than the image (the
//     larger images ceph-csi 3.15 makes, with metaLUKS2HeaderSize, are
//     served the same way: the header says where the data starts);
//   - the first NodeStage formats it: a LUKS2 header at offset 0, data
//     from 16 MiB on, AES-256-XTS with 4096-byte sectors, one Argon2id
//     keyslot with 32 MiB of memory (ceph-csi runs `cryptsetup
//     luksFormat --type luks2 --hash sha256 --pbkdf-memory 32768`), and
//     marks it encrypted; every stage then opens the header with the
//     passphrase and serves the plaintext to the kernel.
//
// Clones and restores of an encrypted volume carry its mark (and its
// header, in the data they share). The passphrase is the node-stage secret's encryptionPassphrase, as
// with ceph-csi's default KMS. The header is the one dm-crypt and
// librbd read, so a volume moves between purerbd and ceph-csi (or
// `rbd device map -o encryption-format=luks2`) either way.
const (
	metaEncrypted = "rbd.csi.ceph.com/encrypted"
	// metaEncryptedOld is where older ceph-csi releases kept the mark.
	metaEncryptedOld = ".rbd.csi.ceph.com/encrypted"
	// cephCSIDefaultKMS is ceph-csi's name (its journal's
	// csi.volume.encryptKMS) for the passphrase in the secret.
	cephCSIDefaultKMS = "default"
	// encryptionPrepared marks an image to format at its first stage,
	// encryptionDone one that carries its LUKS header.
	encryptionPrepared = "encryptionPrepared"
	encryptionDone     = "encrypted"
	// secretEncryptionPassphrase is the key of the passphrase in the
	// node-stage secret.
	secretEncryptionPassphrase = "encryptionPassphrase"
	// luks2HeaderBytes is the room the LUKS2 header takes before the
	// data: cryptsetup's default (and ceph-csi's --luks2-metadata-size
	// 4096k plus --luks2-keyslots-size 8192k).
	luks2HeaderBytes = 16 << 20
	// encryptionTypeBlock is ceph-csi's LUKS encryption; "file" is
	// fscrypt, which purerbd does not do.
	encryptionTypeBlock = "block"
)

// parseEncryption checks a class's encryption parameters and reports
// whether its volumes are encrypted.
func parseEncryption(params map[string]string) (bool, error) {
	v, ok := params[paramEncrypted]
	if !ok {
		return false, nil
	}
	enc, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s %q: want \"true\" or \"false\"", paramEncrypted, v)
	}
	if !enc {
		return false, nil
	}
	if t, ok := params[paramEncryptionType]; ok && t != encryptionTypeBlock {
		return false, fmt.Errorf("%s %q: purerbd encrypts the block device (LUKS2, %q); ceph-csi's file encryption (fscrypt) has no counterpart here",
			paramEncryptionType, t, encryptionTypeBlock)
	}
	return true, nil
}

// imageEncryption reads an image's encryption mark: "" for a plain
// image.
func imageEncryption(ctx context.Context, s Session, img ImageRef) (string, error) {
	v, err := metadataEither(ctx, s, img, metaEncrypted, metaEncryptedOld)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	return v, err
}

// imageMetadata is what the node needs of an image to format it at its
// first stage; *rbd.Image has it.
type imageMetadata interface {
	// Metadata returns a value; a missing key wraps ErrNotFound.
	Metadata(ctx context.Context, key string) (string, error)
	SetMetadata(ctx context.Context, key, value string) error
}

// encryptedImage is the plaintext of an encrypted volume's image, as
// the node serves it.
type encryptedImage struct {
	*luks.Image
	raw NodeImage
}

func (e *encryptedImage) Close() error { return e.raw.Close() }

func (e *encryptedImage) CloseContext(ctx context.Context) error { return closeImage(ctx, e.raw) }

func (e *encryptedImage) Refresh(ctx context.Context) error {
	if r, ok := e.raw.(imageRefresher); ok {
		return r.Refresh(ctx)
	}
	return nil
}

// nodeFormatOptions is the header the node writes on a prepared volume:
// cryptsetup's LUKS2 layout with ceph-csi's KDF memory.
func nodeFormatOptions() luks.FormatOptions {
	return luks.FormatOptions{
		Version: 2,
		KDF:     luks.KDF{Type: "argon2id", Time: 4, Memory: 32 << 10, CPUs: 1},
	}
}

func (n *NodeServer) openEncrypted(ctx context.Context, img NodeImage, volumeID string, passphrase []byte) (NodeImage, error) {
	return OpenEncrypted(ctx, img, volumeID, VolumeKeys{Passphrase: passphrase, KMSConfigPath: n.cfg.KMSConfigPath,
		Secrets: n.cfg.Secrets, Unlocks: n.unlocks}, n.log)
}

// VolumeKeys say where an encrypted volume's LUKS passphrase comes from.
type VolumeKeys struct {
	// Passphrase is the node-stage secret's encryptionPassphrase: the
	// LUKS passphrase itself, or, for a volume made under a KMS section
	// that names no Secret, the KMS passphrase its key is sealed with.
	// Nil when no secret brought one.
	Passphrase []byte
	// KMSConfigPath and Secrets find the KMS passphrase of a volume made
	// under a KMS (kms.go).
	KMSConfigPath string
	Secrets       SecretReader
	// Unlocks, when not nil, holds a token for each LUKS header format
	// or unlock under way, and bounds how many run at once by its
	// capacity: each holds its keyslot KDF's Argon2 memory (32 MiB as
	// the node formats, up to 1 GiB as rbd and cryptsetup format) for
	// the seconds it runs, and volumes staged together would add them
	// up.
	Unlocks chan struct{}
}

// OpenEncrypted is what the node serves of an open volume image: img
// itself when the volume is not encrypted, else its plaintext, after
// formatting the LUKS2 header of a volume the controller marked for it.
// Errors are gRPC statuses with the codes NodeStageVolume answers; img is
// closed on error.
func OpenEncrypted(ctx context.Context, img NodeImage, volumeID string, keys VolumeKeys, log *slog.Logger) (NodeImage, error) {
	md, ok := img.(imageMetadata)
	if !ok {
		return img, nil // test images: never encrypted
	}
	fail := func(code codes.Code, format string, args ...any) (NodeImage, error) {
		closeImage(context.WithoutCancel(ctx), img)
		return nil, status.Errorf(code, format, args...)
	}
	get := func(key string) (string, error) { return md.Metadata(ctx, key) }
	state, err := firstMetadata(get, metaEncrypted, metaEncryptedOld)
	switch {
	case errors.Is(err, ErrNotFound):
		return img, nil
	case err != nil:
		return fail(codes.Unavailable, "volume %q: reading its encryption state: %v", volumeID, err)
	case state == "":
		return img, nil
	case state != encryptionPrepared && state != encryptionDone:
		return fail(codes.FailedPrecondition, "volume %q: encryption state %q is neither %q nor %q", volumeID, state, encryptionPrepared, encryptionDone)
	}
	passphrase, err := luksPassphrase(ctx, md, volumeID, keys)
	if err != nil {
		closeImage(context.WithoutCancel(ctx), img)
		return nil, err
	}
	defer clear(passphrase)
	if keys.Unlocks != nil {
		select {
		case keys.Unlocks <- struct{}{}:
			defer func() { <-keys.Unlocks }()
		case <-ctx.Done():
			closeImage(context.WithoutCancel(ctx), img)
			return nil, status.Errorf(status.FromContextError(ctx.Err()).Code(),
				"volume %q: waiting for another volume's LUKS unlock: %v", volumeID, ctx.Err())
		}
	}
	if state == encryptionPrepared {
		if img.ReadOnly() {
			return fail(codes.FailedPrecondition, "volume %q is encrypted but was never staged for writing, so it has no LUKS header yet", volumeID)
		}
		// formatted and opened with the volume key the format made:
		// the passphrase's KDF runs once
		plain, err := luks.FormatAndOpen(ctx, img, passphrase, nodeFormatOptions())
		if err != nil {
			return fail(codes.Internal, "volume %q: writing its LUKS header: %v", volumeID, err)
		}
		if err := md.SetMetadata(ctx, metaEncrypted, encryptionDone); err != nil {
			return fail(codes.Unavailable, "volume %q: marking it encrypted: %v", volumeID, err)
		}
		log.Info("formatted an encrypted volume (LUKS2)", "volumeID", volumeID)
		return &encryptedImage{Image: plain, raw: img}, nil
	}
	plain, err := luks.Open(ctx, img, passphrase, 0)
	switch {
	case errors.Is(err, luks.ErrWrongPassphrase):
		return fail(codes.PermissionDenied, "volume %q: the secret's %q opens none of its LUKS keyslots", volumeID, secretEncryptionPassphrase)
	case errors.Is(err, luks.ErrNotLUKS), errors.Is(err, luks.ErrCorrupt), errors.Is(err, luks.ErrUnsupported):
		return fail(codes.FailedPrecondition, "volume %q is marked encrypted: %v", volumeID, err)
	case err != nil:
		return fail(codes.Unavailable, "volume %q: opening its LUKS header: %v", volumeID, err)
	}
	return &encryptedImage{Image: plain, raw: img}, nil
}

// newEncryption is what CreateVolume writes on a new encrypted image.
type newEncryption struct {
	state  string // metaEncrypted's value; "" for a plain volume
	kms    volumeKMS
	sealed string // metaDEK's value, under kms; "" without a KMS
}

// newVolumeEncryption is the encryption of a new volume volumeID: a
// clone or restore has its source's (its data is the source's
// ciphertext, whatever the class says; under a KMS its key is sealed
// again for the new volume), a new encrypted volume is prepared for
// formatting at its first stage, with a new key sealed when its class
// names a KMS. An encrypted class cannot restore a plain source: the
// data would have to be encrypted in place.
func (d *Driver) newVolumeEncryption(ctx context.Context, s Session, cl Cluster, cred Credentials, p volumeParams, src *source, size uint64, volumeID string, secrets map[string]string) (newEncryption, error) {
	k := kmsConfig{path: d.cfg.KMSConfigPath, secrets: d.cfg.Secrets}
	if src == nil {
		if !p.Encrypted {
			return newEncryption{}, nil
		}
		if size <= luks2HeaderBytes {
			return newEncryption{}, status.Errorf(codes.OutOfRange, "an encrypted volume needs more than %d bytes: its LUKS2 header takes the first %d", luks2HeaderBytes, luks2HeaderBytes)
		}
		e := newEncryption{state: encryptionPrepared}
		if p.EncryptionKMSID == "" {
			return e, nil
		}
		sec, err := k.section(p.EncryptionKMSID)
		if err != nil {
			return e, err
		}
		e.kms = volumeKMS{kmsID: p.EncryptionKMSID, tenant: p.Tenant}
		e.sealed, err = k.sealNew(ctx, sec, p.Tenant, volumeID, secrets)
		return e, err
	}
	st, err := imageEncryption(ctx, s, src.parent)
	if err != nil {
		return newEncryption{}, storeError(err, cred, "source image %s", src.parent.Name)
	}
	if st == "" {
		if p.Encrypted {
			return newEncryption{}, status.Errorf(codes.InvalidArgument, "the class encrypts its volumes but the content source (image %s) is not encrypted: restore or clone it with a class without %s", src.parent.Name, paramEncrypted)
		}
		return newEncryption{}, nil
	}
	e := newEncryption{state: st}
	sealed, err := metadataEither(ctx, s, src.parent, metaDEK, metaDEKOld)
	if errors.Is(err, ErrNotFound) {
		return e, nil // the passphrase is the node-stage secret's
	}
	if err != nil {
		return e, storeError(err, cred, "source image %s", src.parent.Name)
	}
	if e.kms.kmsID, err = metadataEither(ctx, s, src.parent, metaKMS); err != nil {
		return e, status.Errorf(codes.FailedPrecondition, "source image %s has a sealed key but no %s: made by another driver's KMS, which purerbd cannot open", src.parent.Name, metaKMS)
	}
	if e.kms.tenant, err = metadataEither(ctx, s, src.parent, metaOwner); err != nil && !errors.Is(err, ErrNotFound) {
		return e, storeError(err, cred, "source image %s", src.parent.Name)
	}
	from, err := VolumeID{ClusterID: cl.ID, Pool: src.parent.Pool, Namespace: src.parent.Namespace, Image: liveName(src.parent.Name)}.Encode()
	if err != nil {
		return e, status.Errorf(codes.Internal, "the source's volume ID: %v", err)
	}
	e.sealed, err = k.reseal(ctx, e.kms, from, volumeID, sealed, secrets)
	return e, err
}

// metadataEither reads the first of keys an image has.
func metadataEither(ctx context.Context, s Session, img ImageRef, keys ...string) (string, error) {
	return firstMetadata(func(key string) (string, error) { return s.Metadata(ctx, img, key) }, keys...)
}

// firstMetadata returns the value of the first of keys that get finds
// (ceph-csi's current key before the dot-prefixed one older releases
// wrote); ErrNotFound when there is none.
func firstMetadata(get func(key string) (string, error), keys ...string) (string, error) {
	var err error
	for _, key := range keys {
		var v string
		if v, err = get(key); !errors.Is(err, ErrNotFound) {
			return v, err
		}
	}
	return "", err
}

// write records e on a new volume's image, the mark last.
func (e newEncryption) write(ctx context.Context, s Session, img ImageRef) error {
	if e.sealed != "" {
		for _, kv := range [][2]string{{metaDEK, e.sealed}, {metaKMS, e.kms.kmsID}, {metaOwner, e.kms.tenant}} {
			if err := s.SetMetadata(ctx, img, kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	return s.SetMetadata(ctx, img, metaEncrypted, e.state)
}

// luksPassphrase is the LUKS passphrase of an encrypted volume: its own
// key sealed under a KMS when the image has one, the node-stage secret's
// passphrase otherwise.
func luksPassphrase(ctx context.Context, md imageMetadata, volumeID string, keys VolumeKeys) ([]byte, error) {
	get := func(key string) (string, error) { return md.Metadata(ctx, key) }
	sealed, err := firstMetadata(get, metaDEK, metaDEKOld)
	switch {
	case errors.Is(err, ErrNotFound):
		if len(keys.Passphrase) == 0 {
			return nil, status.Errorf(codes.InvalidArgument, "volume %q is encrypted: the node-stage secret must hold %q", volumeID, secretEncryptionPassphrase)
		}
		return append([]byte(nil), keys.Passphrase...), nil
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "volume %q: reading its sealed key: %v", volumeID, err)
	}
	var v volumeKMS
	if v.kmsID, err = get(metaKMS); err != nil || v.kmsID == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q has a sealed key but no %s: sealed under another driver's KMS, which purerbd cannot open", volumeID, metaKMS)
	}
	if v.tenant, err = get(metaOwner); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, status.Errorf(codes.Unavailable, "volume %q: reading its owner: %v", volumeID, err)
	}
	var secrets map[string]string
	if len(keys.Passphrase) > 0 {
		secrets = map[string]string{secretEncryptionPassphrase: string(keys.Passphrase)}
	}
	return kmsConfig{path: keys.KMSConfigPath, secrets: keys.Secrets}.sealedPassphrase(ctx, v, volumeID, sealed, secrets)
}
