package etcdcluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/tlssource"
)

// The source a section's adopted certificate came from, and a switch under
// way, are annotations of the section's state Secret (tls_sourceca.go),
// beside the certificate itself: each step is one update of one object,
// and a restarted operator reads them back. See
// docs/design/0029-tls-source-switch.md.
const (
	adoptedSourceNote = "etcd.quorumctl.io/tls-source"
	switchFromNote    = "etcd.quorumctl.io/tls-source-switch-from"
)

// recordSourceSwitch takes the step of the section's source switch this
// pass (package tlssource decides it), given whether the three-pass roll
// of the section's source CA is in progress. The roll does the work: the
// new source's certificate is the one offered, its CA the next one; this
// only records which source the members' certificate comes from, and the
// switch while it runs.
func (r *Reconciler) recordSourceSwitch(ctx context.Context, s *scope, sec *tlsSection, rolling bool) error {
	st := sec.adopted
	d := tlssource.Decide(tlssource.Input{
		Adopted: st.secret.Annotations[adoptedSourceNote], Wanted: sec.sourceID,
		From:      st.secret.Annotations[switchFromNote],
		CAChanged: st.changed(), Rolling: rolling,
	})
	if d.Switching {
		sec.switchFrom, sec.switchTo = d.From, d.To
	}
	if d.Step == tlssource.Stay {
		return nil
	}
	secret := st.secret.DeepCopy()
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	switch d.Step {
	case tlssource.Record:
		secret.Annotations[adoptedSourceNote] = sec.sourceID
	case tlssource.Begin:
		secret.Annotations[switchFromNote] = d.From
	case tlssource.Complete:
		delete(secret.Annotations, switchFromNote)
	}
	if d.Step == tlssource.Complete && sec.source == v1alpha1.CertificateSourceOperatorManaged {
		// Back to the operator's CA, which needs no state of a source:
		// emptied, the section is OperatorManaged as at creation
		// (prepareSwitchBack). Emptied rather than deleted: the operator
		// may not delete Secrets, and need not for this.
		secret.Data = nil
	}
	if err := r.Update(ctx, secret); err != nil {
		return fmt.Errorf("failed to record step %s of the %s source switch in Secret %s: %w", d.Step, sec.name, secret.Name, err)
	}
	st.secret = secret
	from, to := tlssource.Describe(d.From), tlssource.Describe(d.To)
	switch {
	case d.InPlace:
		ctrl.LoggerFrom(ctx).Info("TLS source switched in place", "section", sec.name, "from", d.From, "to", d.To)
		r.event(s.cluster, corev1.EventTypeNormal, "TLSSourceSwitched", "SwitchTLSSource",
			"The %s certificates come from %s instead of %s: its CA is the one the members trust, so the certificates were replaced in place, without restarts", sec.name, to, from)
	case d.Step == tlssource.Begin:
		ctrl.LoggerFrom(ctx).Info("TLS source switch", "section", sec.name, "from", d.From, "to", d.To)
		r.event(s.cluster, corev1.EventTypeNormal, "TLSSourceSwitchStarted", "SwitchTLSSource",
			"Switching the %s certificates from %s to %s, whose CA differs: members restart one at a time to trust both CAs, take the new certificate in place, then restart to trust the new CA alone", sec.name, from, to)
	case d.Step == tlssource.Complete && d.From == d.To:
		// Switched back before the switch away had ended.
		ctrl.LoggerFrom(ctx).Info("TLS source switch complete", "section", sec.name, "from", d.From, "to", d.To)
		r.event(s.cluster, corev1.EventTypeNormal, "TLSSourceSwitched", "SwitchTLSSource",
			"The %s certificates come from %s again, and every member trusts its CA alone", sec.name, to)
	case d.Step == tlssource.Complete:
		ctrl.LoggerFrom(ctx).Info("TLS source switch complete", "section", sec.name, "from", d.From, "to", d.To)
		r.event(s.cluster, corev1.EventTypeNormal, "TLSSourceSwitched", "SwitchTLSSource",
			"The %s certificates come from %s instead of %s, and every member trusts its CA alone", sec.name, to, from)
	}
	return nil
}

// switchSummary says each section's source switch under way, for the
// TLSSourceSwitching reason; "" when none is.
func (s *scope) switchSummary() string {
	if s.tls == nil || s.tls.peer == nil || s.tls.client == nil {
		return ""
	}
	var parts []string
	for _, sec := range []*tlsSection{s.tls.peer, s.tls.client} {
		if sec.switchFrom == "" && sec.switchTo == "" {
			continue
		}
		if sec.switchFrom == sec.switchTo {
			// Switched back before the switch away had ended.
			parts = append(parts, fmt.Sprintf("switching the %s certificates back to %s", sec.name, tlssource.Describe(sec.switchTo)))
			continue
		}
		parts = append(parts, fmt.Sprintf("switching the %s certificates from %s to %s", sec.name, tlssource.Describe(sec.switchFrom), tlssource.Describe(sec.switchTo)))
	}
	return strings.Join(parts, "; ")
}

// endUnusedRotation ends a rotation of the section's operator CA that a
// switch to another source cut short (tlssource.OperatorCAUnused): no member
// trusts that CA or holds a certificate of it, so nothing is rolled. The
// new CA of pass 1 becomes the signing one (the rotation was asked for, or
// the old CA nears its end), the one pass 2 replaced is forgotten. Left in
// place, the rotation would take its next step when the CA is offered
// again by a switch back: reissuing from a CA the members' bundle does not
// hold, or waiting for certificates only the switch's own pass 2 gives, a
// wait the switch holds in turn.
func (r *Reconciler) endUnusedRotation(ctx context.Context, s *scope, section string, st *caState, adopted string) (*caState, error) {
	if st.next == nil && st.previous == nil {
		return st, nil
	}
	secret := st.secret.DeepCopy()
	if st.next != nil {
		secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey] = secret.Data[nextCertKey], secret.Data[nextKeyKey]
	}
	delete(secret.Data, nextCertKey)
	delete(secret.Data, nextKeyKey)
	delete(secret.Data, previousCertKey)
	if err := r.Update(ctx, secret); err != nil {
		return nil, fmt.Errorf("failed to end the %s CA rotation left in Secret %s: %w", section, secret.Name, err)
	}
	ended, err := readCAState(secret)
	if err != nil {
		return nil, err
	}
	ctrl.LoggerFrom(ctx).Info("CA rotation cut short by a source switch ended", "section", section, "source", adopted)
	r.event(s.cluster, corev1.EventTypeNormal, "CARotationCompleted", "RotateCA",
		"The %s CA rotation the switch to %s cut short ends without restarts: no member trusts the operator's CA any more, so its newest CA signs from now on", section, tlssource.Describe(adopted))
	return ended, nil
}
