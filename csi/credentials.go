package csi

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Secret keys of requests, as in ceph-csi's RBD driver.
const (
	secretUserID  = "userID"
	secretUserKey = "userKey"
)

// Credentials are a Ceph user (without the "client." prefix) and its
// base64 cephx key. Every way of printing Credentials hides the key.
type Credentials struct {
	ID  string
	Key string
}

// String names the user and hides the key.
func (c Credentials) String() string { return "client." + c.ID + " (key redacted)" }

// GoString hides the key from %#v.
func (c Credentials) GoString() string { return c.String() }

// LogValue hides the key from slog.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Format hides the key from every fmt verb.
func (c Credentials) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// CredentialSource returns the plugin's own credentials for a cluster: the
// ones used for the calls that carry no secrets (Probe, ListVolumes,
// GetCapacity, ControllerGetVolume, the sweep) and for reading calls
// sent without them; never for a call that changes an image.
type CredentialSource func(clusterID string) (Credentials, bool)

// CredentialsFromDir reads credentials from a mounted Kubernetes Secret:
// files "<clusterID>.userID" and "<clusterID>.userKey" for one cluster,
// else "userID" and "userKey" for all. Files are read on every call, so a
// rotated Secret takes effect without a restart.
func CredentialsFromDir(dir string) CredentialSource {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return func(clusterID string) (Credentials, bool) {
		if id, key := read(clusterID+"."+secretUserID), read(clusterID+"."+secretUserKey); id != "" && key != "" {
			return Credentials{ID: id, Key: key}, true
		}
		if id, key := read(secretUserID), read(secretUserKey); id != "" && key != "" {
			return Credentials{ID: id, Key: key}, true
		}
		return Credentials{}, false
	}
}

// access says whether a request may fall back on the plugin's own
// credentials. Only calls that read may: the plugin's user is typically
// allowed everywhere, and a request that changes images (create, delete,
// expand, snapshot) must be authorised by the secret its StorageClass or
// VolumeSnapshotClass names, so that neither a class without a secret nor
// a crafted ID borrows the plugin's rights.
type access int

const (
	reading  access = iota // the plugin's credentials stand in for missing secrets
	changing               // the request's own secrets are required
)

// credentials picks the request's secrets, else, for a reading request,
// the plugin's own credentials for the cluster.
func (d *Driver) credentials(secrets map[string]string, clusterID string, a access) (Credentials, error) {
	id, key := secrets[secretUserID], secrets[secretUserKey]
	switch {
	case id != "" && key != "":
		return Credentials{ID: strings.TrimPrefix(id, "client."), Key: key}, nil
	case id != "" || key != "":
		return Credentials{}, status.Errorf(codes.InvalidArgument, "secrets must hold both %q and %q", secretUserID, secretUserKey)
	}
	if a == changing {
		return Credentials{}, status.Errorf(codes.InvalidArgument,
			"no secrets in the request: a call that changes volumes or snapshots needs the StorageClass's (or VolumeSnapshotClass's) secret with %q and %q; the plugin's own credentials are used only for reading",
			secretUserID, secretUserKey)
	}
	if d.cfg.Credentials != nil {
		if c, ok := d.cfg.Credentials(clusterID); ok {
			return c, nil
		}
	}
	return Credentials{}, status.Errorf(codes.InvalidArgument,
		"no secrets in the request and no plugin credentials for cluster %q: give the StorageClass a secret with %q and %q",
		clusterID, secretUserID, secretUserKey)
}
