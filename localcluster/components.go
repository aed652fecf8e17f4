package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// serviceAccountIssuer is the issuer of service account tokens, the in-cluster name of the API server as
// kubeadm sets it.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// command is a component to run: its program name and arguments.
type command struct {
	name string
	args []string
}

// layout is where the components of one cluster listen and keep their files.
type layout struct {
	dir  string
	pki  *pki
	opts Options

	etcdClient, etcdPeer, apiserver, controllerManager, scheduler int
}

// localURL is scheme://127.0.0.1:port.
func localURL(scheme string, port int) string { return scheme + "://127.0.0.1:" + strconv.Itoa(port) }

func (l layout) etcdCommand() command {
	peer := localURL("http", l.etcdPeer)
	return command{"etcd", []string{
		"--name=default",
		"--data-dir=" + filepath.Join(l.dir, "etcd"),
		"--listen-client-urls=" + localURL("http", l.etcdClient),
		"--advertise-client-urls=" + localURL("http", l.etcdClient),
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		// The data is thrown away after the run; fsync only slows a busy test machine down.
		"--unsafe-no-fsync=true",
	}}
}

func (l layout) apiserverCommand() (command, error) {
	p := l.pki.path
	args := []string{
		"--etcd-servers=" + localURL("http", l.etcdClient),
		// Guests reach the API server through the tier's relay on the host loopback.
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(l.apiserver),
		"--advertise-address=" + l.opts.AdvertiseAddress,
		"--cert-dir=" + filepath.Join(l.dir, "apiserver"),
		"--tls-cert-file=" + p("apiserver.crt"),
		"--tls-private-key-file=" + p("apiserver.key"),
		"--client-ca-file=" + p("ca.crt"),
		"--authorization-mode=Node,RBAC",
		// Added to the default plugins, which include ServiceAccount.
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-key-file=" + p("sa.pub"),
		"--service-account-signing-key-file=" + p("sa.key"),
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-cluster-ip-range=" + l.opts.ServiceCIDR,
		"--kubelet-client-certificate=" + p("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + p("apiserver-kubelet-client.key"),
		// Guests' host names do not resolve on the host; their InternalIPs are what the egress proxy routes.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--allow-privileged=true",
		// Aggregated API servers trust requests from this front proxy. Without it the controller-manager
		// and the scheduler also log an error each time they read the extension-apiserver-authentication
		// ConfigMap, which would crowd real errors out of a failed test's log tails.
		"--requestheader-client-ca-file=" + p("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p("front-proxy-client.crt"),
		"--proxy-client-key-file=" + p("front-proxy-client.key"),
	}
	if l.opts.EgressProxySocket != "" {
		config := filepath.Join(l.dir, "egress-selector.yaml")
		if err := writeEgressConfig(config, l.opts.EgressProxySocket); err != nil {
			return command{}, fmt.Errorf("egress selector configuration: %w", err)
		}
		args = append(args, "--egress-selector-config-file="+config)
	}
	return command{"kube-apiserver", args}, nil
}

func (l layout) controllerManagerCommand() (command, error) {
	kubeconfig, err := componentKubeconfig(l.dir, l.pki, localURL("https", l.apiserver), "kube-controller-manager")
	if err != nil {
		return command{}, err
	}
	p := l.pki.path
	return command{"kube-controller-manager", []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--controllers=*",
		"--allocate-node-cidrs=false",
		// Every controller runs as its own service account, under the RBAC rules made for it.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p("sa.key"),
		// Published to every namespace as the kube-root-ca.crt ConfigMap, which service account token volumes
		// mount.
		"--root-ca-file=" + p("ca.crt"),
		// Lets kubelets have their CSRs signed (serving certificates, rotation).
		"--cluster-signing-cert-file=" + p("ca.crt"),
		"--cluster-signing-key-file=" + p("ca.key"),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(l.controllerManager),
		"--tls-cert-file=" + p("kube-controller-manager-serving.crt"),
		"--tls-private-key-file=" + p("kube-controller-manager-serving.key"),
	}}, nil
}

// snapshotControllerCommand runs the snapshot controller with the admin's credentials (it ships its own
// RBAC manifests, which a test cluster need not install for it).
func (l layout) snapshotControllerCommand() (command, error) {
	kubeconfig, err := componentKubeconfig(l.dir, l.pki, localURL("https", l.apiserver), "admin")
	if err != nil {
		return command{}, err
	}
	return command{"snapshot-controller", []string{"--kubeconfig=" + kubeconfig, "--leader-election=false", "--v=2"}}, nil
}

func (l layout) schedulerCommand() (command, error) {
	kubeconfig, err := componentKubeconfig(l.dir, l.pki, localURL("https", l.apiserver), "kube-scheduler")
	if err != nil {
		return command{}, err
	}
	// The scheduler's --kubeconfig and --leader-elect flags are deprecated in favour of this file.
	config := filepath.Join(l.dir, "kube-scheduler.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
leaderElection:
  leaderElect: false
`, kubeconfig), 0o644); err != nil {
		return command{}, err
	}
	p := l.pki.path
	return command{"kube-scheduler", []string{
		"--config=" + config,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(l.scheduler),
		"--tls-cert-file=" + p("kube-scheduler-serving.crt"),
		"--tls-private-key-file=" + p("kube-scheduler-serving.key"),
	}}, nil
}

// waitFor polls ready until it returns nil, a component exits, or ctx ends; the error then says what was
// awaited and the last reason it was not ready.
func (c *Cluster) waitFor(ctx context.Context, what string, ready func(context.Context) error) error {
	start := time.Now()
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.procs {
			if err := p.Exited(); err != nil {
				return false, err
			}
		}
		last = ready(ctx)
		return last == nil, nil
	})
	if err != nil {
		if last != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (last: %v)", err, last)
		}
		return fmt.Errorf("wait for %s: %w", what, err)
	}
	c.logf("%s ok after %v", what, time.Since(start).Round(time.Millisecond))
	return nil
}

// probeTimeout bounds each readiness request.
const probeTimeout = 5 * time.Second

func (l layout) etcdHealthy(ctx context.Context) error {
	return probe(ctx, http.DefaultClient, localURL("http", l.etcdClient)+"/health", `"health":"true"`)
}

func (l layout) schedulerReady(ctx context.Context) error {
	return probe(ctx, l.componentClient(), localURL("https", l.scheduler)+"/readyz", "ok")
}

func (l layout) controllerManagerHealthy(ctx context.Context) error {
	return probe(ctx, l.componentClient(), localURL("https", l.controllerManager)+"/healthz", "ok")
}

// componentClient verifies the components' serving certificates against the cluster CA. Their health
// endpoints are open to anonymous requests.
func (l layout) componentClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(l.pki.ca.certPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
}

// probe GETs target and wants status 200 with want in the body.
func probe(ctx context.Context, client *http.Client, target, want string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %s: %s", target, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func (c *Cluster) apiserverReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(body)))
	}
	if string(body) != "ok" {
		return errors.New(string(body))
	}
	return nil
}

func (c *Cluster) defaultServiceAccount(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err = cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
	return err
}
