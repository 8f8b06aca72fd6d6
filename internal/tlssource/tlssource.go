package tlssource

import (
	"strings"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// ID names a section's source as the spec gives it, in a form that is
// stored with the certificate the members were given from it: the same ID
// is the same source. Defaults are applied, so that a spec written with
// them and one written without name the same issuer.
func ID(source v1alpha1.CertificateSource, spec v1alpha1.CertificateSourceSpec) string {
	switch source {
	case v1alpha1.CertificateSourceSecret:
		return string(source) + "/" + spec.SecretName
	case v1alpha1.CertificateSourceCertManager:
		if spec.IssuerRef == nil {
			return string(source)
		}
		kind, group := spec.IssuerRef.Kind, spec.IssuerRef.Group
		if kind == "" {
			kind = "Issuer"
		}
		if group == "" {
			group = "cert-manager.io"
		}
		return string(source) + "/" + group + "/" + kind + "/" + spec.IssuerRef.Name
	}
	return string(v1alpha1.CertificateSourceOperatorManaged)
}

// Describe is an ID as people read it: "Secret my-tls", "cert-manager
// Issuer etcd-ca", "the operator's CA".
func Describe(id string) string {
	parts := strings.Split(id, "/")
	switch {
	case id == string(v1alpha1.CertificateSourceOperatorManaged):
		return "the operator's CA"
	case parts[0] == string(v1alpha1.CertificateSourceSecret) && len(parts) == 2:
		return "Secret " + parts[1]
	case parts[0] == string(v1alpha1.CertificateSourceCertManager) && len(parts) == 4:
		if parts[1] != "cert-manager.io" {
			return "issuer " + parts[1] + "/" + parts[2] + " " + parts[3]
		}
		return "cert-manager " + parts[2] + " " + parts[3]
	}
	return id
}

// Input is what a pass observed of one section with a Secret or
// cert-manager source.
type Input struct {
	// Adopted is the ID of the source the members' certificate came
	// from, as recorded with it; "" when nothing is recorded (state
	// written by an operator that did not record it, when the source
	// could not change).
	Adopted string
	// Wanted is the ID of the source the spec names.
	Wanted string
	// From is the switch recorded as under way: the ID of the source it
	// began from; "" for none.
	From string
	// CAChanged: the wanted source's CA is not the one the members'
	// certificate came with (the three-pass roll is to carry it).
	CAChanged bool
	// Rolling: the section's three-pass roll is in progress this pass
	// (carotation decided a phase).
	Rolling bool
}

// Step is what the pass records.
type Step string

const (
	// Stay: nothing to record.
	Stay Step = ""
	// Record: the members' certificate comes from the wanted source
	// now; record it as adopted from Wanted.
	Record Step = "Record"
	// Begin: the wanted source's CA differs: record the switch as under
	// way from Adopted; the roll carries it, and its pass 2 gives the
	// members the new source's certificate.
	Begin Step = "Begin"
	// Complete: the roll that carried the switch has ended; forget the
	// switch.
	Complete Step = "Complete"
)

// Decision is the step, and whether a switch is under way after it.
type Decision struct {
	Step Step
	// Switching: a switch is under way after the step (the reason says
	// so while it runs).
	Switching bool
	// InPlace: the step completes a switch whose new source has the
	// CA the members trust: the certificate changed in place, no member
	// restarted.
	InPlace bool
	// From and To name the switch, when there is one.
	From, To string
}

// Decide is the record of a section's source switch. The members are
// given what the operator adopted from the source (its certificate and
// CA); a certificate of the CA they trust is adopted as soon as the source
// holds it, one of another CA only at the roll's pass 2. So the members'
// certificate comes from the wanted source exactly when the wanted
// source's CA is the adopted one, and that is when Adopted moves to
// Wanted. A switch is recorded from the pass that sees its CA differ
// until the roll has ended, its pass 3 included; a switch back to the
// source the members' certificate still comes from (during pass 1) ends
// with the roll that takes the next CA away again.
func Decide(in Input) Decision {
	switch {
	case in.Adopted == "":
		// Nothing recorded: the state predates switches, when the
		// source could not change, so it is the spec's.
		return Decision{Step: Record}
	case in.Adopted != in.Wanted && !in.CAChanged && in.From == "":
		return Decision{Step: Record, InPlace: true, From: in.Adopted, To: in.Wanted}
	case in.Adopted != in.Wanted && !in.CAChanged:
		// Pass 2 of the roll reached: the members are given the new
		// source's certificate.
		return Decision{Step: Record, Switching: true, From: in.From, To: in.Wanted}
	case in.Adopted != in.Wanted && in.From == "":
		return Decision{Step: Begin, Switching: true, From: in.Adopted, To: in.Wanted}
	case in.Adopted != in.Wanted && in.From == in.Wanted:
		// Back to where the switch began, once the members hold the
		// certificate of the source it went to: said as the switch
		// from that source it now is.
		return Decision{Switching: true, From: in.Adopted, To: in.Wanted}
	case in.Adopted != in.Wanted:
		return Decision{Switching: true, From: in.From, To: in.Wanted}
	case in.From != "" && !in.Rolling:
		return Decision{Step: Complete, From: in.From, To: in.Wanted}
	case in.From != "":
		return Decision{Switching: true, From: in.From, To: in.Wanted}
	}
	return Decision{}
}

// OperatorCAUnused: a section whose state records adopted (the source its
// members' certificate came from) serves a Secret's or cert-manager's
// certificate: no member holds a certificate of the operator's CA of the
// section, whatever the members still trust while a switch away from it
// ends. A rotation of that CA left in its Secret (the source was switched
// while it rolled) then has nothing to roll, and must end before the CA is
// offered again by a switch back: left to take its next step on its own,
// it would reissue from a CA the members' bundle does not hold, or wait for
// members to serve certificates of its new CA, which only the switch's own
// pass 2 hands out, while the switch waits for it in turn.
func OperatorCAUnused(adopted string) bool {
	return adopted != "" && adopted != string(v1alpha1.CertificateSourceOperatorManaged)
}
