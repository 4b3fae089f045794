package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Encryption KMS, as ceph-csi configures them: a class's encryptionKMSID
// names a section of a JSON file (the ConfigMap
// ceph-csi-encryption-kms-config mounted at DefaultKMSConfigPath) whose
// "encryptionKMSType" (or the older "KMS_PROVIDER") says what it is.
// purerbd knows ceph-csi's "metadata" type: each volume gets its own
// random LUKS passphrase (its DEK), sealed in the image's metadata
// (dek.go) with the encryptionPassphrase of a Kubernetes Secret, the
// section's "secretName" in its "secretNamespace" (the claim's namespace
// when left out), or, without secretName, of the request's own secret.
const (
	// DefaultKMSConfigPath is where ceph-csi's pods find the KMS
	// configuration.
	DefaultKMSConfigPath = "/etc/ceph-csi-encryption-kms-config/config.json"

	kmsTypeMetadata = "metadata"
	// metaKMS and metaOwner record, on an image sealed under a KMS,
	// which KMS section and which claim namespace (the tenant a
	// secretName without secretNamespace is read in) it was made with,
	// for the node and for clones.
	metaKMS   = "purerbd.csi.encryptionKMSID"
	metaOwner = "purerbd.csi.owner"
	// paramPVCNamespace is the claim's namespace, which the
	// provisioner's --extra-create-metadata adds to CreateVolume.
	paramPVCNamespace = "csi.storage.k8s.io/pvc/namespace"
)

// SecretReader reads a Kubernetes Secret's data (decoded), for KMS
// sections that name one; csi/kubeapi provides it in a pod.
type SecretReader func(ctx context.Context, namespace, name string) (map[string]string, error)

// kmsSection is one section of the KMS configuration.
type kmsSection struct {
	id              string
	kind            string
	secretName      string
	secretNamespace string
}

// kmsConfig reads KMS sections from a file.
type kmsConfig struct {
	path    string // "" is DefaultKMSConfigPath
	secrets SecretReader
}

// section returns the KMS section id names; an unknown id or type is
// FAILED_PRECONDITION (the configuration, not the request, is missing).
func (k kmsConfig) section(id string) (kmsSection, error) {
	path := k.path
	if path == "" {
		path = DefaultKMSConfigPath
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return kmsSection{}, status.Errorf(codes.FailedPrecondition, "encryptionKMSID %q: no KMS configuration at %s (mount ceph-csi's ceph-csi-encryption-kms-config ConfigMap there)", id, path)
	}
	if err != nil {
		return kmsSection{}, status.Errorf(codes.Unavailable, "reading the KMS configuration: %v", err)
	}
	all, err := parseKMSConfig(b)
	if err != nil {
		return kmsSection{}, status.Errorf(codes.FailedPrecondition, "the KMS configuration %s: %v", path, err)
	}
	s, ok := all[id]
	if !ok {
		return kmsSection{}, status.Errorf(codes.FailedPrecondition, "encryptionKMSID %q: no such section in %s", id, path)
	}
	if s.kind != kmsTypeMetadata {
		return kmsSection{}, status.Errorf(codes.FailedPrecondition, "encryptionKMSID %q is a KMS of type %q; purerbd supports ceph-csi's %q type (the passphrase in a Kubernetes Secret)", id, s.kind, kmsTypeMetadata)
	}
	return s, nil
}

// parseKMSConfig decodes ceph-csi's KMS configuration: a JSON object of
// sections by KMS ID, each naming its type.
func parseKMSConfig(b []byte) (map[string]kmsSection, error) {
	var all map[string]map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("not a JSON object of KMS sections: %w", err)
	}
	out := make(map[string]kmsSection, len(all))
	for id, sec := range all {
		str := func(key string) string { v, _ := sec[key].(string); return v }
		s := kmsSection{id: id, kind: str("encryptionKMSType"), secretName: str("secretName"), secretNamespace: str("secretNamespace")}
		if s.kind == "" {
			s.kind = str("KMS_PROVIDER")
		}
		if s.kind == "" {
			return nil, fmt.Errorf("KMS section %q names no encryptionKMSType", id)
		}
		out[id] = s
	}
	return out, nil
}

// CheckKMSConfig checks ceph-csi's KMS configuration (config.json of
// the ceph-csi-encryption-kms-config ConfigMap) as the plugin reads it,
// and returns the IDs of the sections purerbd can use.
func CheckKMSConfig(b []byte) ([]string, error) {
	all, err := parseKMSConfig(b)
	if err != nil {
		return nil, err
	}
	var ids []string
	for id, s := range all {
		if s.kind == kmsTypeMetadata {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// passphrase is the KMS passphrase of section s for a volume of tenant:
// the named Secret's, or the request's secret's.
func (k kmsConfig) passphrase(ctx context.Context, s kmsSection, tenant string, secrets map[string]string) ([]byte, error) {
	if s.secretName == "" {
		if p := secrets[secretEncryptionPassphrase]; p != "" {
			return []byte(p), nil
		}
		return nil, status.Errorf(codes.InvalidArgument, "encryptionKMSID %q names no secretName: the request's secret must hold %q", s.id, secretEncryptionPassphrase)
	}
	ns := s.secretNamespace
	if ns == "" {
		ns = tenant
	}
	if ns == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "encryptionKMSID %q: secret %q has no secretNamespace and the volume records no claim namespace (is the provisioner run with --extra-create-metadata?)", s.id, s.secretName)
	}
	if k.secrets == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "encryptionKMSID %q: reading secret %s/%s needs the Kubernetes API, which this plugin cannot reach", s.id, ns, s.secretName)
	}
	data, err := k.secrets(ctx, ns, s.secretName)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "encryptionKMSID %q: reading secret %s/%s: %v", s.id, ns, s.secretName, err)
	}
	p := data[secretEncryptionPassphrase]
	if p == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "encryptionKMSID %q: secret %s/%s holds no %q", s.id, ns, s.secretName, secretEncryptionPassphrase)
	}
	return []byte(p), nil
}

// volumeKMS is how a volume's LUKS passphrase is kept: kmsID "" is the
// passphrase in the node-stage secret itself.
type volumeKMS struct {
	kmsID, tenant string
}

// sealedPassphrase opens the LUKS passphrase of volumeID sealed under v.
func (k kmsConfig) sealedPassphrase(ctx context.Context, v volumeKMS, volumeID, sealed string, secrets map[string]string) ([]byte, error) {
	kp, err := k.volumePassphrase(ctx, v, secrets)
	if err != nil {
		return nil, err
	}
	return openSealed(kp, v, volumeID, sealed)
}

// volumePassphrase is the KMS passphrase of volumes made under v.
func (k kmsConfig) volumePassphrase(ctx context.Context, v volumeKMS, secrets map[string]string) ([]byte, error) {
	s, err := k.section(v.kmsID)
	if err != nil {
		return nil, err
	}
	return k.passphrase(ctx, s, v.tenant, secrets)
}

// openSealed opens the key of volumeID sealed with the KMS passphrase kp.
func openSealed(kp []byte, v volumeKMS, volumeID, sealed string) ([]byte, error) {
	dek, err := openDEK(kp, volumeID, sealed)
	if errors.Is(err, errWrongKMSPassphrase) {
		return nil, status.Errorf(codes.PermissionDenied, "volume %q: %v (KMS %q)", volumeID, err, v.kmsID)
	}
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q: %s: %v", volumeID, metaDEK, err)
	}
	return []byte(dek), nil
}

// sealNew makes and seals a new DEK for volumeID under section s.
func (k kmsConfig) sealNew(ctx context.Context, s kmsSection, tenant, volumeID string, secrets map[string]string) (string, error) {
	kp, err := k.passphrase(ctx, s, tenant, secrets)
	if err != nil {
		return "", err
	}
	dek, err := newDEK()
	if err != nil {
		return "", status.Error(codes.Internal, err.Error())
	}
	sealed, err := sealDEK(kp, volumeID, dek)
	if err != nil {
		return "", status.Errorf(codes.Internal, "sealing a volume key: %v", err)
	}
	return sealed, nil
}

// reseal opens the DEK sealed for fromID and seals it again for toID
// (a clone shares its source's LUKS header, so its passphrase).
func (k kmsConfig) reseal(ctx context.Context, v volumeKMS, fromID, toID, sealed string, secrets map[string]string) (string, error) {
	kp, err := k.volumePassphrase(ctx, v, secrets)
	if err != nil {
		return "", err
	}
	dek, err := openSealed(kp, v, fromID, sealed)
	if err != nil {
		return "", err
	}
	defer clear(dek)
	out, err := sealDEK(kp, toID, string(dek))
	if err != nil {
		return "", status.Errorf(codes.Internal, "sealing a volume key: %v", err)
	}
	return out, nil
}
