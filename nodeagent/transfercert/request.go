package transfercert

import (
	"context"
	"fmt"
	"slices"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
)

// SignerName is the operator's transfer signer (operator/transferca.SignerName).
const SignerName = "lvm.topolvm.io/transfer"

// Requester asks for the node's transfer certificate.
type Requester struct {
	Client kubernetes.Interface
	Node   string
	Clock  clock.WithTicker
	// Poll is how often the request is read while the operator has not answered (0: 2 s).
	Poll time.Duration
}

// Identity makes a key, asks for a certificate and waits (until ctx ends) for the operator to sign or
// deny it. A denial is an error with the operator's reason.
func (r *Requester) Identity(ctx context.Context) (*blockcopy.Identity, error) {
	key, csrPEM, err := blockcopy.NewKeyAndRequest(r.Node)
	if err != nil {
		return nil, err
	}
	csr := &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "lvms-transfer-" + r.Node + "-"},
		Spec: certv1.CertificateSigningRequestSpec{Request: csrPEM, SignerName: SignerName,
			Usages: []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth, certv1.UsageServerAuth}},
	}
	api := r.Client.CertificatesV1().CertificateSigningRequests()
	created, err := api.Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("ask for the transfer certificate of node %s: %w", r.Node, err)
	}
	poll := r.Poll
	if poll <= 0 {
		poll = 2 * time.Second
	}
	tick := r.Clock.NewTicker(poll)
	defer tick.Stop()
	for {
		got, err := api.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read certificate request %s: %w", created.Name, err)
		}
		if err == nil {
			if i := slices.IndexFunc(got.Status.Conditions, func(c certv1.CertificateSigningRequestCondition) bool {
				return c.Type == certv1.CertificateDenied || c.Type == certv1.CertificateFailed
			}); i >= 0 {
				c := got.Status.Conditions[i]
				return nil, fmt.Errorf("the operator refused the transfer certificate of node %s (request %s, %s): %s", r.Node, got.Name, c.Reason, c.Message)
			}
			if len(got.Status.Certificate) > 0 {
				cert, ca, err := blockcopy.SplitIssued(got.Status.Certificate)
				if err != nil {
					return nil, fmt.Errorf("certificate request %s: %w", got.Name, err)
				}
				return blockcopy.LoadIdentity(r.Node, key, cert, ca, r.Clock)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the operator did not sign the transfer certificate of node %s (request %s): %w; is the LVMS operator running?", r.Node, created.Name, context.Cause(ctx))
		case <-tick.C():
		}
	}
}
