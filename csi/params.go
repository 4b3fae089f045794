package csi

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
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
	// paramDeviceType picks the kernel device of the class's volumes:
	// auto (the node's choice), nbd or ublk (NodeConfig.DeviceType).
	paramDeviceType = "deviceType"

	// Honoured as ceph-csi does (layout.go, mapoptions.go), or checked
	// and found to mean what purerbd does anyway.
	paramImageFormat  = "imageFormat" // Rook's default class sets "2"
	paramStripeUnit   = "stripeUnit"
	paramStripeCount  = "stripeCount"
	paramObjectSize   = "objectSize"
	paramMounter      = "mounter"
	paramMapOptions   = "mapOptions"
	paramUnmapOptions = "unmapOptions"

	// Accepted and ignored: they tune what purerbd does not have (the
	// rbd-nbd process's log file, a fallback from krbd to rbd-nbd).
	paramTryOtherMounters = "tryOtherMounters"
	paramCephLogDir       = "cephLogDir"
	paramCephLogStrategy  = "cephLogStrategy"

	// Refused when they ask for what purerbd does not do, accepted
	// when they ask for what it does.
	paramEncrypted       = "encrypted"
	paramEncryptionType  = "encryptionType"
	paramEncryptionKMSID = "encryptionKMSID"
	paramThickProvision  = "thickProvision" // removed from ceph-csi in v3.6
	paramTopologyPools   = "topologyConstrainedPools"

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
	// ctxMapOptions carries the class's mapOptions, as ceph-csi's volume
	// context does, for the node to apply to the volume's NBD device.
	ctxMapOptions = "mapOptions"
	// ctxDeviceType carries the class's deviceType.
	ctxDeviceType = "deviceType"
)

// rbdNbdMounter is the one mounter value purerbd takes: ceph-csi's name
// for mapping through NBD with a user-space RBD client, which is what
// purerbd does for every volume.
const rbdNbdMounter = "rbd-nbd"

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
	Layout      imageLayout
	// TopologyPools is the class's topologyConstrainedPools, checked:
	// the pool comes from the request's topology (topology.go).
	TopologyPools []topologyPool
	// MapOptions is the class's mapOptions, checked, for the node.
	MapOptions string
	// DeviceType is the class's deviceType, checked, for the node.
	DeviceType string
	// Encrypted is the class's encrypted, checked: new volumes are LUKS2
	// volumes as ceph-csi makes them (encryption.go); EncryptionKMSID
	// the KMS section keeping their passphrases (kms.go), "" for the
	// node-stage secret's, and Tenant the claim's namespace.
	Encrypted       bool
	EncryptionKMSID string
	Tenant          string
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
		paramImageFeatures, paramVolumePrefix, paramSnapshotPrefix, paramMkfsOptions, paramDeviceType,
		paramImageFormat, paramStripeUnit, paramStripeCount, paramObjectSize,
		paramMounter, paramMapOptions, paramUnmapOptions,
		paramTryOtherMounters, paramCephLogDir, paramCephLogStrategy,
		paramEncrypted, paramEncryptionType, paramEncryptionKMSID, paramThickProvision, paramTopologyPools); err != nil {
		return volumeParams{}, err
	}
	if err := checkCephCSIParams(params); err != nil {
		return volumeParams{}, status.Error(codes.InvalidArgument, err.Error())
	}
	p := volumeParams{
		ClusterID:   params[paramClusterID],
		Pool:        params[paramPool],
		DataPool:    params[paramDataPool],
		MkfsOptions: params[paramMkfsOptions],
		Prefix:      defaultVolumePrefix,
	}
	p.Encrypted, _ = parseEncryption(params) // checked above
	if p.Encrypted {
		p.EncryptionKMSID, p.Tenant = params[paramEncryptionKMSID], params[paramPVCNamespace]
	}
	var err error
	if v := params[paramTopologyPools]; v != "" {
		if p.TopologyPools, err = parseTopologyPools(v); err != nil {
			return p, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	if p.Pool == "" && p.TopologyPools == nil {
		return p, status.Errorf(codes.InvalidArgument, "parameter %q is required (or %q)", paramPool, paramTopologyPools)
	}
	if p.Layout, err = parseLayout(params); err != nil {
		return p, status.Error(codes.InvalidArgument, err.Error())
	}
	if v, ok := params[paramDeviceType]; ok {
		if err := checkDeviceType(v); err != nil {
			return volumeParams{}, status.Errorf(codes.InvalidArgument, "%s: %v", paramDeviceType, err)
		}
		p.DeviceType = v
	}
	if v, ok := params[paramMapOptions]; ok {
		if _, err := parseMapOptions(v); err != nil {
			return p, status.Error(codes.InvalidArgument, err.Error())
		}
		p.MapOptions = v
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
		if f == "journaling" {
			// ceph-csi offers it with rbd-nbd, for journal-based
			// mirroring.
			return nil, fmt.Errorf("%s: unsupported image feature %q: purerbd's RBD client does not write the image journal that journal-based mirroring replays; leave it out and mirror with snapshots", paramImageFeatures, f)
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

// checkCephCSIParams checks the ceph-csi parameters that purerbd accepts
// only with some values: those that say what purerbd does (or does not
// ask for what it cannot do) pass, the others are refused with the
// reason and what to use instead. Keys are checked in a fixed order so
// the same class always gets the same message.
func checkCephCSIParams(params map[string]string) error {
	if v, ok := params[paramImageFormat]; ok {
		switch v {
		case "2":
		case "1":
			return fmt.Errorf("%s %q: purerbd makes only format 2 images (format 1 is deprecated in Ceph and has no snapshots to clone from, no image features); set %s to \"2\" or leave it out",
				paramImageFormat, v, paramImageFormat)
		default:
			return fmt.Errorf("%s %q: RBD image formats are \"1\" and \"2\"; purerbd makes format 2, so set \"2\" or leave it out", paramImageFormat, v)
		}
	}
	if v, ok := params[paramMounter]; ok {
		switch v {
		case rbdNbdMounter:
		case "rbd", "krbd":
			return fmt.Errorf("%s %q: purerbd does not map images with the kernel's rbd driver (krbd); it serves every volume over NBD from its own RBD client, which is what %s: %s means: set %s to %q or leave it out",
				paramMounter, v, paramMounter, rbdNbdMounter, paramMounter, rbdNbdMounter)
		default:
			return fmt.Errorf("%s %q is not a ceph-csi mounter (rbd, rbd-nbd); purerbd maps every volume as %s does: set %q or leave it out",
				paramMounter, v, rbdNbdMounter, rbdNbdMounter)
		}
	}
	if v, ok := params[paramTryOtherMounters]; ok {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%s %q: want \"true\" or \"false\" (purerbd has one mounter, so either does nothing)", paramTryOtherMounters, v)
		}
	}
	if _, err := parseEncryption(params); err != nil {
		return err
	}
	if v, ok := params[paramThickProvision]; ok {
		thick, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s %q: want \"true\" or \"false\"", paramThickProvision, v)
		}
		if thick {
			return fmt.Errorf("%s %q: purerbd makes thin images (ceph-csi dropped thick provisioning in v3.6); leave it out",
				paramThickProvision, v)
		}
	}
	if v, ok := params[paramUnmapOptions]; ok {
		if err := checkUnmapOptions(v); err != nil {
			return err
		}
	}
	return nil
}
