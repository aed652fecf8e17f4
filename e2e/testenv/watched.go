package testenv

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/lvms-dev/lvms/reaper"
)

// startWatched starts te so that nothing of it outlives the test binary, however the binary ends: etcd and
// kube-apiserver carry the binary's mark (reaper.Start comes first), so its watchdog kills them; their
// state is in directories the watchdog removes: etcd's data and the API server's certificates, made and
// registered here before anything starts, and envtest's webhook serving certificates
// (/tmp/envtest-serving-certs-*), registered as soon as te.Start made them — te starts without CRDs, which
// are installed after, so that moment is not seconds of CRD installation late. It returns the admin
// configuration and the directories. On error nothing is left running and the directories are gone.
func startWatched(te *envtest.Environment, crdDirs []string) (*rest.Config, []string, error) {
	if err := reaper.Start(); err != nil {
		return nil, nil, err
	}
	var dirs []string
	fail := func(err error) (*rest.Config, []string, error) {
		return nil, nil, errors.Join(err, te.Stop(), removeWatched(dirs))
	}
	for _, pattern := range []string{"lvms-envtest-etcd-", "lvms-envtest-apiserver-"} {
		d, err := os.MkdirTemp("", pattern)
		if err != nil {
			return fail(err)
		}
		dirs = append(dirs, d)
		if err := reaper.Remove(d); err != nil {
			return fail(err)
		}
	}
	if te.ControlPlane.Etcd == nil {
		te.ControlPlane.Etcd = &envtest.Etcd{}
	}
	te.ControlPlane.Etcd.DataDir = dirs[0]
	te.ControlPlane.GetAPIServer().CertDir = dirs[1]
	cfg, err := te.Start()
	if d := te.WebhookInstallOptions.LocalServingCertDir; d != "" {
		dirs = append(dirs, d)
		err = errors.Join(err, reaper.Remove(d))
	}
	if err != nil {
		return fail(err)
	}
	if len(crdDirs) > 0 {
		crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
			Paths: crdDirs, ErrorIfPathMissing: true, Scheme: te.Scheme, WebhookOptions: te.WebhookInstallOptions,
		})
		if err != nil {
			return fail(fmt.Errorf("install CRDs: %w", err))
		}
		te.CRDs = crds
	}
	return cfg, dirs, nil
}

// removeWatched removes directories startWatched made or registered, and tells the watchdog.
func removeWatched(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d), reaper.Forget(d))
	}
	return errors.Join(errs...)
}

// Dirs are the directories the control plane keeps its state in: etcd's data, the API server's
// certificates, envtest's webhook serving certificates. Stop removes them, and so does the test binary's
// watchdog (reaper) should the binary die first.
func (e *Env) Dirs() []string { return slices.Clone(e.dirs) }
