// Command kube is the Kubernetes control plane, node agent and client of
// the e2e-k8s harness in one binary, built from the Kubernetes sources of
// the release go.mod pins: it runs as the component named by its first
// argument (or by the name it is called under), with that component's own
// flags, exactly as the component's own main would.
//
//	kube etcd | kube-apiserver | kube-controller-manager | kube-scheduler |
//	     kubelet | kubectl  [flags...]
//
// There is no kube-proxy: the e2e node routes the one Service its pods
// use with a single nft rule.
//
// One binary links the shared packages once, which matters on a machine
// that builds it from source before the first run.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // CronJob time zones, as kube-apiserver and kube-controller-manager link it

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "kube" {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, "usage: kube etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl [flags...]")
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	// Each component parses os.Args[1:] itself.
	os.Args = append([]string{name}, args...)
	var command *cobra.Command
	switch name {
	case "etcd":
		etcdmain.Main(os.Args)
		return
	case "kubectl":
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) // nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	case "kube-apiserver":
		command = apiserver.NewAPIServerCommand()
	case "kube-controller-manager":
		command = controllermanager.NewControllerManagerCommand()
	case "kube-scheduler":
		command = scheduler.NewSchedulerCommand()
	case "kubelet":
		command = kubelet.NewKubeletCommand(context.Background())
	default:
		fmt.Fprintf(os.Stderr, "kube: unknown component %q\n", name)
		os.Exit(2)
	}
	os.Exit(cli.Run(command))
}
