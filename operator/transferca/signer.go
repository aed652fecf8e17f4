package transferca

import (
	"context"
	"fmt"
	"slices"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Signer answers the node agents' CertificateSigningRequests for SignerName: approved and signed when
// Sign accepts them, denied with Sign's reason otherwise. The issued certificate is followed by the CA's
// in status.certificate, so an agent learns the CA from the API server it already trusts.
type Signer struct {
	// Client reads the requests and keeps the CA Secret; Approvals writes the approval and the certificate
	// (the subresources controller-runtime's client does not reach).
	Client    client.Client
	Approvals kubernetes.Interface
	// Namespace holds the CA Secret (SecretName); AgentUser is the node agent's ServiceAccount user name.
	Namespace, AgentUser string
	Clock                clock.PassiveClock
}

// Reconcile handles one request. A request already approved, denied or signed is left alone.
func (s *Signer) Reconcile(ctx context.Context, name string) error {
	csr := &certv1.CertificateSigningRequest{}
	if err := s.Client.Get(ctx, types.NamespacedName{Name: name}, csr); err != nil {
		return client.IgnoreNotFound(err)
	}
	if csr.Spec.SignerName != SignerName || len(csr.Status.Certificate) > 0 || decided(csr, certv1.CertificateDenied) || decided(csr, certv1.CertificateFailed) {
		return nil
	}
	ca, err := s.loadCA(ctx)
	if err != nil {
		return err
	}
	extra := map[string][]string{}
	for k, v := range csr.Spec.Extra {
		extra[k] = slices.Clone(v)
	}
	certPEM, node, err := ca.Sign(Request{CSR: csr.Spec.Request, Username: csr.Spec.Username, Extra: extra}, s.AgentUser)
	if err != nil {
		return s.decide(ctx, csr, certv1.CertificateDenied, "TransferCertificateRefused", err.Error())
	}
	if !decided(csr, certv1.CertificateApproved) {
		if err := s.decide(ctx, csr, certv1.CertificateApproved, "TransferCertificateForNode", "the request comes from the LVMS node agent on node "+node); err != nil {
			return err
		}
	}
	caPEM, _, err := ca.PEM()
	if err != nil {
		return err
	}
	csr.Status.Certificate = append(certPEM, caPEM...)
	if _, err := s.Approvals.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("issue the certificate of request %s: %w", csr.Name, err)
	}
	return nil
}

func decided(csr *certv1.CertificateSigningRequest, t certv1.RequestConditionType) bool {
	return slices.ContainsFunc(csr.Status.Conditions, func(c certv1.CertificateSigningRequestCondition) bool { return c.Type == t })
}

// decide approves or denies csr through the approval subresource and keeps the returned object in csr.
func (s *Signer) decide(ctx context.Context, csr *certv1.CertificateSigningRequest, t certv1.RequestConditionType, reason, msg string) error {
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastUpdateTime: metav1.NewTime(s.Clock.Now()),
	})
	got, err := s.Approvals.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("%s request %s: %w", t, csr.Name, err)
	}
	*csr = *got
	return nil
}

// loadCA reads the CA from its Secret, or makes one (also when the old one is about to expire).
func (s *Signer) loadCA(ctx context.Context) (*CA, error) {
	sec := &corev1.Secret{}
	err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: SecretName}, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get the transfer CA Secret %s/%s: %w", s.Namespace, SecretName, err)
	}
	found := err == nil
	if found {
		ca, perr := Parse(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey], s.Clock)
		if perr == nil && !ca.NeedsRenewal() {
			return ca, nil
		}
		if perr != nil {
			return nil, fmt.Errorf("the transfer CA Secret %s/%s: %w (delete it and LVMS makes a new CA; agents then ask for new certificates)", s.Namespace, SecretName, perr)
		}
	}
	ca, err := New(s.Clock)
	if err != nil {
		return nil, err
	}
	c, k, err := ca.PEM()
	if err != nil {
		return nil, err
	}
	sec.Type = corev1.SecretTypeTLS
	sec.Data = map[string][]byte{corev1.TLSCertKey: c, corev1.TLSPrivateKeyKey: k}
	if found {
		err = s.Client.Update(ctx, sec)
	} else {
		sec.ObjectMeta = metav1.ObjectMeta{Namespace: s.Namespace, Name: SecretName}
		err = s.Client.Create(ctx, sec)
	}
	if err != nil {
		// Another writer won (a conflict, or AlreadyExists): use theirs on the next call.
		return nil, fmt.Errorf("store the transfer CA in Secret %s/%s: %w", s.Namespace, SecretName, err)
	}
	return ca, nil
}
