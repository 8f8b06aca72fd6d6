package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CertificateSource says where a TLS section's certificates come from.
// +kubebuilder:validation:Enum=OperatorManaged;Secret;CertManager
type CertificateSource string

const (
	// CertificateSourceOperatorManaged: the operator keeps a CA per cluster
	// and section in a Secret and issues every member's certificate from it.
	CertificateSourceOperatorManaged CertificateSource = "OperatorManaged"
	// CertificateSourceSecret: the user's own Secret, with tls.crt, tls.key
	// and ca.crt; its certificate must name every member (a wildcard for
	// the peer Service's domain does).
	CertificateSourceSecret CertificateSource = "Secret"
	// CertificateSourceCertManager: a cert-manager Certificate per member
	// against an Issuer or ClusterIssuer the user names.
	CertificateSourceCertManager CertificateSource = "CertManager"
)

// Defaults of operator-managed certificates.
const (
	DefaultCADuration          = 5 * 365 * 24 * time.Hour
	DefaultCertificateDuration = 90 * 24 * time.Hour
)

// TLSSpec turns on TLS for the traffic between members and on the client
// port. It may be set when the cluster is created or later (turning TLS
// on, docs/design/0023-plain-to-tls.md), and never removed. Afterwards
// only each section's source may change, between a Secret and cert-manager
// (docs/design/0029-tls-source-switch.md); see the rules on
// EtcdClusterSpec.
//
// +kubebuilder:validation:XValidation:rule="!has(self.operatorManaged) || !has(self.operatorManaged.caDuration) || !has(self.operatorManaged.certificateDuration) || duration(self.operatorManaged.caDuration) > duration(self.operatorManaged.certificateDuration)",message="tls.operatorManaged.caDuration must be longer than tls.operatorManaged.certificateDuration: a CA cannot sign certificates that outlive it"
type TLSSpec struct {
	// Peer is the TLS between members. Members authenticate each other
	// with their certificates.
	// +kubebuilder:default={}
	// +optional
	Peer PeerTLS `json:"peer,omitempty"`

	// Client is the TLS of the client port, which the client Service
	// exposes.
	// +kubebuilder:default={}
	// +optional
	Client ClientTLS `json:"client,omitempty"`

	// OperatorManaged tunes the certificates the operator issues itself.
	// +optional
	OperatorManaged *OperatorManagedTLS `json:"operatorManaged,omitempty"`
}

// CertificateSourceSpec names a section's certificate source.
type CertificateSourceSpec struct {
	// Source of the certificates.
	// +kubebuilder:default=OperatorManaged
	// +optional
	Source CertificateSource `json:"source,omitempty"`

	// SecretName is the user's Secret (source Secret) in the cluster's
	// namespace, with tls.crt, tls.key and ca.crt. Its certificate is used by
	// every member, as server and as client certificate, so it must name
	// every member's DNS name (a wildcard for the peer Service's domain
	// does) and allow both server and client authentication.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="tls secretName must be the name of a Secret: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// IssuerRef is the cert-manager Issuer or ClusterIssuer (source
	// CertManager) that issues each member's certificate.
	// +optional
	IssuerRef *IssuerReference `json:"issuerRef,omitempty"`
}

// IssuerReference names a cert-manager issuer.
type IssuerReference struct {
	// Name of the issuer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Kind is Issuer (in the cluster's namespace) or ClusterIssuer.
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	// +optional
	Kind string `json:"kind,omitempty"`
	// Group of the issuer; cert-manager.io unless an external issuer.
	// +kubebuilder:default="cert-manager.io"
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Group string `json:"group,omitempty"`
}

// PeerTLS is the TLS between members.
//
// +kubebuilder:validation:XValidation:rule="(has(self.source) ? self.source : 'OperatorManaged') != 'Secret' || (has(self.secretName) && size(self.secretName) > 0)",message="tls.peer.secretName is required when tls.peer.source is Secret"
// +kubebuilder:validation:XValidation:rule="(has(self.source) ? self.source : 'OperatorManaged') == 'Secret' || !has(self.secretName)",message="tls.peer.secretName is only used when tls.peer.source is Secret"
// +kubebuilder:validation:XValidation:rule="(has(self.source) ? self.source : 'OperatorManaged') != 'CertManager' || has(self.issuerRef)",message="tls.peer.issuerRef is required when tls.peer.source is CertManager"
// +kubebuilder:validation:XValidation:rule="(has(self.source) ? self.source : 'OperatorManaged') == 'CertManager' || !has(self.issuerRef)",message="tls.peer.issuerRef is only used when tls.peer.source is CertManager"
type PeerTLS struct {
	CertificateSourceSpec `json:",inline"`
}

// ClientTLS is the TLS of the client port.
//
// +kubebuilder:validation:XValidation:rule="(has(self.source) ? self.source : 'OperatorManaged') != 'Secret' || (has(self.secretName) && size(self.secretName) > 0)",message="tls.client.secretName is required when tls.client.source is Secret"
// +kubebuilder:validation:XValidation:rule="(has(self.source) ? self.source : 'OperatorManaged') == 'Secret' || !has(self.secretName)",message="tls.client.secretName is only used when tls.client.source is Secret"
// +kubebuilder:validation:XValidation:rule="(has(self.source) ? self.source : 'OperatorManaged') != 'CertManager' || has(self.issuerRef)",message="tls.client.issuerRef is required when tls.client.source is CertManager"
// +kubebuilder:validation:XValidation:rule="(has(self.source) ? self.source : 'OperatorManaged') == 'CertManager' || !has(self.issuerRef)",message="tls.client.issuerRef is only used when tls.client.source is CertManager"
type ClientTLS struct {
	CertificateSourceSpec `json:",inline"`

	// Mutual requires every client to present a certificate that the
	// cluster's client CA signed (etcd's --client-cert-auth).
	// +kubebuilder:default=true
	// +optional
	Mutual *bool `json:"mutual,omitempty"`
}

// IsMutual is Mutual with its default applied.
func (c ClientTLS) IsMutual() bool { return c.Mutual == nil || *c.Mutual }

// OperatorManagedTLS tunes operator-managed certificates. Member and client
// certificates are renewed at two thirds of their lifetime, without a
// restart. A CA is rotated, members restarting one at a time, once less
// than the longer of a certificate lifetime and a fifth of its own lifetime
// remains, or on request (the etcd.quorumctl.io/rotate-ca annotation); not
// during another rollout, unless the CA has less than half that margin
// left.
type OperatorManagedTLS struct {
	// CADuration is the lifetime of a new CA. Defaults to 5 years.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="tls.operatorManaged.caDuration must be at least 1h"
	// +optional
	CADuration *metav1.Duration `json:"caDuration,omitempty"`
	// CertificateDuration is the lifetime of a member's, the operator's
	// and the administrators' certificates. Defaults to 90 days.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5m')",message="tls.operatorManaged.certificateDuration must be at least 5m"
	// +optional
	CertificateDuration *metav1.Duration `json:"certificateDuration,omitempty"`
}

// Lifetimes returns the CA and certificate lifetimes with defaults applied.
func (t *TLSSpec) Lifetimes() (ca, leaf time.Duration) {
	ca, leaf = DefaultCADuration, DefaultCertificateDuration
	if t == nil || t.OperatorManaged == nil {
		return ca, leaf
	}
	if d := t.OperatorManaged.CADuration; d != nil {
		ca = d.Duration
	}
	if d := t.OperatorManaged.CertificateDuration; d != nil {
		leaf = d.Duration
	}
	return ca, leaf
}

// PeerSource is the peer section's source with its default applied.
func (t *TLSSpec) PeerSource() CertificateSource { return sourceOrDefault(t.Peer.Source) }

// ClientSource is the client section's source with its default applied.
func (t *TLSSpec) ClientSource() CertificateSource { return sourceOrDefault(t.Client.Source) }

func sourceOrDefault(s CertificateSource) CertificateSource {
	if s == "" {
		return CertificateSourceOperatorManaged
	}
	return s
}

// IssueClientCertificateAnnotation on a Secret labelled with the cluster
// asks the operator to fill it with a client certificate from the cluster's
// client CA (kubectl etcd issue-client-cert). Its value is the certificate's
// common name.
const IssueClientCertificateAnnotation = "etcd.quorumctl.io/issue-client-certificate"

// RotateCAAnnotation on an EtcdCluster asks the operator to rotate every
// CA it keeps for the cluster (kubectl etcd rotate-ca sets it). Its value
// names the request (any string; the plugin writes the time): a value the
// operator has acted on, which status.tls.rotateCARequest records, is not
// acted on again, so the annotation may stay. A request made while a
// rotation or another rollout (a version upgrade, say) runs starts after
// it, with a CA made after the request.
const RotateCAAnnotation = "etcd.quorumctl.io/rotate-ca"

// ReleasePlaintextAnnotation on an EtcdCluster turning TLS on says that
// no client uses plaintext any more: the transition's second pass, which
// takes plaintext away, waits for it (status.tls.transition.wait
// PlaintextInUse). Any non-empty value; the operator cannot tell which
// scheme a client speaks, so only the user can say. See
// docs/design/0023-plain-to-tls.md.
const ReleasePlaintextAnnotation = "etcd.quorumctl.io/release-plaintext"

// KeepOldCAAnnotation on an EtcdCluster (any non-empty value) holds a CA
// rotation once every member serves certificates of the new CA: the old CA
// is not dropped, so no member restarts to trust the new one alone, until
// the annotation is removed. It is for clients outside the operator that
// must be handed their certificate of the new CA (a restart, a file copied
// onto a host) before the members refuse the old one: kube-apiserver, say,
// whose Secret volume the kubelet updates only after a delay nobody can
// observe from outside the Pod. spec.rollout.paused cannot hold this point:
// it holds the first pass's restarts too, so a pause set to catch the end
// of the second pass would have to land in a window of a few seconds.
const KeepOldCAAnnotation = "etcd.quorumctl.io/keep-old-ca"

// Phases of a CA rotation, in status.tls.<section>.rotation.
const (
	// CARotationTrustingNewCA: pass 1 of 3; members restart one at a time
	// to trust the old and the new CA.
	CARotationTrustingNewCA = "TrustingNewCA"
	// CARotationSwitchingCertificates: pass 2 of 3; certificates are
	// reissued from the new CA, in place.
	CARotationSwitchingCertificates = "SwitchingCertificates"
	// CARotationDroppingOldCA: pass 3 of 3; members restart one at a time
	// to trust the new CA alone.
	CARotationDroppingOldCA = "DroppingOldCA"
)

// MemberTLS is what shapes a member's TLS. It is decided when the member is
// created; its trust bundles are rolled like the template (a CA rotation,
// or a switch of source, changes them), the rest is fixed.
type MemberTLS struct {
	// Peer is set when the member speaks TLS to its peers.
	// +optional
	Peer *MemberTLSEndpoint `json:"peer,omitempty"`
	// Client is set when the member serves TLS on its client port.
	// +optional
	Client *MemberTLSEndpoint `json:"client,omitempty"`
}

// MemberTLSEndpoint is one side's TLS of a member.
type MemberTLSEndpoint struct {
	// TrustBundle is the ConfigMap holding the CA certificates the member
	// trusts. It is named after its content and never changes: etcd reads
	// its CA files only at start, while it re-reads its own certificate
	// and key at every handshake.
	TrustBundle string `json:"trustBundle"`
	// ClientCertAuth requires client certificates (client side).
	// +optional
	ClientCertAuth bool `json:"clientCertAuth,omitempty"`
}

// TLSStatus is where the cluster's TLS stands.
type TLSStatus struct {
	// Peer and Client describe each section.
	// +optional
	Peer *TLSSectionStatus `json:"peer,omitempty"`
	// +optional
	Client *TLSSectionStatus `json:"client,omitempty"`
	// RotateCARequest is the last value of the etcd.quorumctl.io/rotate-ca
	// annotation that started a rotation.
	// +optional
	RotateCARequest string `json:"rotateCARequest,omitempty"`
	// Transition is where turning TLS on for the running cluster stands;
	// absent when none is under way (docs/design/0023-plain-to-tls.md).
	// +optional
	Transition *TLSTransitionStatus `json:"transition,omitempty"`
}

// TLSTransitionStatus is where turning TLS on for a running cluster stands.
type TLSTransitionStatus struct {
	// Phase is AddingTLS (members restart one at a time onto TLS beside
	// plaintext), ClientsMaySwitch (every member serves https and the
	// operator uses it: move clients to https, plaintext still works), or
	// RefusingPlaintext (members restart one at a time onto TLS alone).
	// +optional
	Phase string `json:"phase,omitempty"`
	// Wait says what holds the next step: Restarting (a member is not
	// back yet), PlaintextInUse (waiting for the
	// etcd.quorumctl.io/release-plaintext annotation), Paused
	// (spec.rollout.paused) or Quorum (a member's peer URL moves only
	// while every other member serves).
	// +optional
	Wait string `json:"wait,omitempty"`
	// ClientsHTTPS: the operator dials the members over https. Set once
	// every member serves both schemes; until then it dials http.
	// +optional
	ClientsHTTPS bool `json:"clientsHTTPS,omitempty"`
	// ReleasePlaintextRequest is the value of the
	// etcd.quorumctl.io/release-plaintext annotation the transition took
	// as the user's word that no client uses plaintext any more.
	// +optional
	ReleasePlaintextRequest string `json:"releasePlaintextRequest,omitempty"`
}

// TLSSectionStatus is one section's trust and certificates.
type TLSSectionStatus struct {
	// TrustBundle is the trust bundle new members are created with.
	// +optional
	TrustBundle string `json:"trustBundle,omitempty"`
	// CANotAfter is when the CA that signs the members' certificates
	// expires.
	// +optional
	CANotAfter *metav1.Time `json:"caNotAfter,omitempty"`
	// NextRenewal is the earliest time a member certificate is due for
	// renewal.
	// +optional
	NextRenewal *metav1.Time `json:"nextRenewal,omitempty"`
	// Rotation is the pass of a CA rotation in progress
	// (TrustingNewCA, SwitchingCertificates, DroppingOldCA); empty when
	// none is.
	// +optional
	Rotation string `json:"rotation,omitempty"`
}

// Names of the objects the operator keeps for a cluster's TLS.
func CASecretName(cluster, section string) string { return cluster + "-" + section + "-ca" }

// MemberTLSSecretName holds a member's peer and client certificates.
func MemberTLSSecretName(member string) string { return member + "-tls" }

// OperatorClientSecretName holds the operator's own client certificate.
func OperatorClientSecretName(cluster string) string { return cluster + "-operator-client" }

// AdminClientSecretName holds a client certificate for administrators
// (operator-managed client TLS only).
func AdminClientSecretName(cluster string) string { return cluster + "-admin-client" }

// TLS sections.
const (
	TLSSectionPeer   = "peer"
	TLSSectionClient = "client"
)
