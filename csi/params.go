package csi

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// StorageClass and VolumeSnapshotClass parameters, named as in ceph-csi's
// RBD driver so existing classes carry over.
const (
	paramClusterID      = "clusterID"
	paramPool           = "pool"
	paramDataPool       = "dataPool"
	paramNamespace      = "radosNamespace"
	paramImageFeatures  = "imageFeatures"
	paramVolumePrefix   = "volumeNamePrefix"
	paramSnapshotPrefix = "snapshotNamePrefix"
	paramMkfsOptions    = "mkfsOptions"
	paramFsType         = "csi.storage.k8s.io/fstype"

	// Parameters under this prefix belong to the Kubernetes sidecars
	// (secret references, and the PVC/PV/snapshot names the provisioner
	// and snapshotter add with --extra-create-metadata); accepted and
	// ignored, except paramFsType.
	k8sParamPrefix = "csi.storage.k8s.io/"
)

// Volume context keys handed to the node in CreateVolumeResponse.
const (
	ctxClusterID   = "clusterID"
	ctxPool        = "pool"
	ctxNamespace   = "radosNamespace"
	ctxImageName   = "imageName"
	ctxDataPool    = "dataPool"
	ctxMkfsOptions = "mkfsOptions"
	ctxFsType      = "fsType"
)

// supportedFeatures are the RBD image features a StorageClass may ask for,
// with the feature each depends on.
var supportedFeatures = map[string]string{
	"layering":       "",
	"exclusive-lock": "",
	"object-map":     "exclusive-lock",
	"fast-diff":      "object-map",
	"deep-flatten":   "",
}

// supportedFsTypes are the filesystems the node service can make.
var supportedFsTypes = []string{"ext4", "xfs"}

type volumeParams struct {
	ClusterID   string
	Pool        string
	DataPool    string
	Namespace   string
	hasNS       bool
	Features    []string
	Prefix      string
	MkfsOptions string
	FsType      string
}

type snapshotParams struct {
	ClusterID string
	Prefix    string
}

// unknownParams returns an INVALID_ARGUMENT error naming every key of
// params that is neither in known nor under k8sParamPrefix.
func unknownParams(params map[string]string, known ...string) error {
	var bad []string
	for k := range params {
		if !slices.Contains(known, k) && !strings.HasPrefix(k, k8sParamPrefix) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return status.Errorf(codes.InvalidArgument, "unknown parameters %q (known: %s and %s*)", bad, strings.Join(known, ", "), k8sParamPrefix)
}

func parseVolumeParams(params map[string]string) (volumeParams, error) {
	if err := unknownParams(params, paramClusterID, paramPool, paramDataPool, paramNamespace,
		paramImageFeatures, paramVolumePrefix, paramSnapshotPrefix, paramMkfsOptions); err != nil {
		return volumeParams{}, err
	}
	p := volumeParams{
		ClusterID:   params[paramClusterID],
		Pool:        params[paramPool],
		DataPool:    params[paramDataPool],
		MkfsOptions: params[paramMkfsOptions],
		Prefix:      defaultVolumePrefix,
	}
	if p.Pool == "" {
		return p, status.Errorf(codes.InvalidArgument, "parameter %q is required", paramPool)
	}
	p.Namespace, p.hasNS = params[paramNamespace]
	if err := checkField(paramNamespace, p.Namespace, true); err != nil {
		return p, status.Error(codes.InvalidArgument, err.Error())
	}
	if v, ok := params[paramVolumePrefix]; ok {
		if err := checkPrefix(paramVolumePrefix, v); err != nil {
			return p, status.Error(codes.InvalidArgument, err.Error())
		}
		p.Prefix = v
	}
	if v, ok := params[paramSnapshotPrefix]; ok {
		// ceph-csi accepts it on StorageClasses too; it names the
		// snapshots of volumes this class makes, which purerbd takes
		// from the VolumeSnapshotClass instead. Checked, then unused.
		if err := checkPrefix(paramSnapshotPrefix, v); err != nil {
			return p, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	if v, ok := params[paramImageFeatures]; ok {
		f, err := parseFeatures(v)
		if err != nil {
			return p, status.Error(codes.InvalidArgument, err.Error())
		}
		p.Features = f
	}
	if v, ok := params[paramFsType]; ok && v != "" {
		if err := checkFsType(v); err != nil {
			return p, err
		}
		p.FsType = v
	}
	return p, nil
}

func parseSnapshotParams(params map[string]string) (snapshotParams, error) {
	// "pool" is accepted for ceph-csi compatibility (it names the pool of
	// ceph-csi's snapshot journal); RBD snapshots always live with their
	// source image, so it is ignored.
	if err := unknownParams(params, paramClusterID, paramSnapshotPrefix, paramPool); err != nil {
		return snapshotParams{}, err
	}
	p := snapshotParams{ClusterID: params[paramClusterID], Prefix: defaultSnapshotPrefix}
	if v, ok := params[paramSnapshotPrefix]; ok {
		if err := checkPrefix(paramSnapshotPrefix, v); err != nil {
			return p, status.Error(codes.InvalidArgument, err.Error())
		}
		p.Prefix = v
	}
	return p, nil
}

// parseFeatures parses imageFeatures ("layering,exclusive-lock,...").
func parseFeatures(v string) ([]string, error) {
	var fs []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if _, ok := supportedFeatures[f]; !ok {
			return nil, fmt.Errorf("%s: unsupported image feature %q", paramImageFeatures, f)
		}
		if !slices.Contains(fs, f) {
			fs = append(fs, f)
		}
	}
	for _, f := range fs {
		if dep := supportedFeatures[f]; dep != "" && !slices.Contains(fs, dep) {
			return nil, fmt.Errorf("%s: feature %q needs %q", paramImageFeatures, f, dep)
		}
	}
	if len(fs) == 0 {
		return nil, fmt.Errorf("%s is empty", paramImageFeatures)
	}
	return fs, nil
}

func checkFsType(fs string) error {
	if !slices.Contains(supportedFsTypes, fs) {
		return status.Errorf(codes.InvalidArgument, "filesystem %q is not supported (supported: %s)", fs, strings.Join(supportedFsTypes, ", "))
	}
	return nil
}
