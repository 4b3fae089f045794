package main

import (
	"log/slog"

	"github.com/purerbd/purerbd/csi"
	"github.com/purerbd/purerbd/csi/kubeapi"
)

// kubeSecrets reads Kubernetes Secrets through the API server of the pod
// the plugin runs in, for the KMS sections of encrypted classes that name
// a Secret; nil outside a pod (such classes are then refused, saying
// why). Nothing is read until such a class is used.
func kubeSecrets(log *slog.Logger, saDir string) csi.SecretReader {
	kc, err := kubeapi.InCluster(saDir)
	if err != nil {
		log.Debug("no Kubernetes API: KMS sections naming a Secret cannot be used", "reason", err.Error())
		return nil
	}
	c, err := kubeapi.New(kc)
	if err != nil {
		log.Warn("no Kubernetes API: KMS sections naming a Secret cannot be used", "err", err)
		return nil
	}
	return c.SecretData
}
