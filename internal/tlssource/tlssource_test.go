package tlssource

import (
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

const (
	secretA = "Secret/a"
	issuerB = "CertManager/cert-manager.io/Issuer/b"
	// operator is the ID a state taken over from the operator's own CA
	// records (a switch from OperatorManaged).
	operator = "OperatorManaged"
)

func TestDecide(t *testing.T) {
	cases := []struct {
		name string
		in   Input
		want Decision
	}{
		{"nothing recorded: the spec's source is recorded", Input{Wanted: secretA}, Decision{Step: Record}},
		{"nothing recorded during a CA change of the source: still a rotation, not a switch", Input{Wanted: secretA, CAChanged: true}, Decision{Step: Record}},
		{"settled", Input{Adopted: secretA, Wanted: secretA}, Decision{}},
		{"the source's own CA changes: a rotation, not a switch", Input{Adopted: secretA, Wanted: secretA, CAChanged: true, Rolling: true}, Decision{}},
		{"a switch to a source of the same CA: in place, done", Input{Adopted: secretA, Wanted: issuerB},
			Decision{Step: Record, InPlace: true, From: secretA, To: issuerB}},
		{"a switch to a source of another CA begins", Input{Adopted: secretA, Wanted: issuerB, CAChanged: true},
			Decision{Step: Begin, Switching: true, From: secretA, To: issuerB}},
		{"pass 1: the members keep the old source's certificate", Input{Adopted: secretA, Wanted: issuerB, From: secretA, CAChanged: true, Rolling: true},
			Decision{Switching: true, From: secretA, To: issuerB}},
		{"pass 1 waiting for another rollout", Input{Adopted: secretA, Wanted: issuerB, From: secretA, CAChanged: true},
			Decision{Switching: true, From: secretA, To: issuerB}},
		{"pass 2: the new source's certificate is given", Input{Adopted: secretA, Wanted: issuerB, From: secretA, Rolling: true},
			Decision{Step: Record, Switching: true, From: secretA, To: issuerB}},
		{"pass 2 and 3 go on", Input{Adopted: issuerB, Wanted: issuerB, From: secretA, Rolling: true},
			Decision{Switching: true, From: secretA, To: issuerB}},
		{"the roll has ended", Input{Adopted: issuerB, Wanted: issuerB, From: secretA},
			Decision{Step: Complete, From: secretA, To: issuerB}},
		{"switched back during pass 1: ends with the roll that takes the next CA away", Input{Adopted: secretA, Wanted: secretA, From: secretA, Rolling: true},
			Decision{Switching: true, From: secretA, To: secretA}},
		{"from the operator's CA: its per-member certificates are the adopted ones, so the switch begins", Input{Adopted: operator, Wanted: issuerB, CAChanged: true},
			Decision{Step: Begin, Switching: true, From: operator, To: issuerB}},
		{"from the operator's CA, pass 2: the source's certificate replaces the per-member ones", Input{Adopted: operator, Wanted: issuerB, From: operator, Rolling: true},
			Decision{Step: Record, Switching: true, From: operator, To: issuerB}},
		{"from the operator's CA, ended", Input{Adopted: issuerB, Wanted: issuerB, From: operator},
			Decision{Step: Complete, From: operator, To: issuerB}},
		{"from the operator's CA to a source holding that CA: in place", Input{Adopted: operator, Wanted: secretA},
			Decision{Step: Record, InPlace: true, From: operator, To: secretA}},
		{"back to the source it began from, once the members hold the other's certificate: said from that one", Input{Adopted: issuerB, Wanted: operator, From: operator, CAChanged: true, Rolling: true},
			Decision{Switching: true, From: issuerB, To: operator}},
		{"retargeted during pass 1 to a third source", Input{Adopted: secretA, Wanted: "Secret/c", From: secretA, CAChanged: true, Rolling: true},
			Decision{Switching: true, From: secretA, To: "Secret/c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.in); got != tc.want {
				t.Errorf("Decide(%+v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

// A switch is idempotent: a pass that re-reads what the last one recorded
// takes no step again, and the steps of a whole switch come in order.
func TestDecideWholeSwitch(t *testing.T) {
	for _, from := range []string{secretA, operator} {
		t.Run(from, func(t *testing.T) { wholeSwitch(t, from) })
	}
}

func wholeSwitch(t *testing.T, from string) {
	st := Input{Adopted: from, Wanted: issuerB, CAChanged: true}
	apply := func(d Decision) {
		switch d.Step {
		case Record:
			st.Adopted = st.Wanted
		case Begin:
			st.From = d.From
		case Complete:
			st.From = ""
		}
	}
	var steps []Step
	for _, phase := range []struct{ caChanged, rolling bool }{
		{true, false}, {true, true}, {true, true}, // begin, pass 1
		{false, true}, {false, true}, // pass 2 (the roll's Switch adopted the new CA)
		{false, true}, {false, false}, {false, false}, // pass 3, end
	} {
		st.CAChanged, st.Rolling = phase.caChanged, phase.rolling
		d := Decide(st)
		if d.Step != Stay {
			steps = append(steps, d.Step)
		}
		apply(d)
	}
	want := []Step{Begin, Record, Complete}
	if len(steps) != len(want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Fatalf("steps %v, want %v", steps, want)
		}
	}
	if st.From != "" || st.Adopted != issuerB {
		t.Fatalf("end state %+v", st)
	}
}

func TestIDAndDescribe(t *testing.T) {
	withDefaults := ID(v1alpha1.CertificateSourceCertManager, v1alpha1.CertificateSourceSpec{IssuerRef: &v1alpha1.IssuerReference{Name: "b", Kind: "Issuer", Group: "cert-manager.io"}})
	bare := ID(v1alpha1.CertificateSourceCertManager, v1alpha1.CertificateSourceSpec{IssuerRef: &v1alpha1.IssuerReference{Name: "b"}})
	if withDefaults != bare || bare != issuerB {
		t.Fatalf("defaults name the same issuer: %q, %q", withDefaults, bare)
	}
	if got := ID(v1alpha1.CertificateSourceSecret, v1alpha1.CertificateSourceSpec{SecretName: "a"}); got != secretA {
		t.Fatalf("ID = %q", got)
	}
	for id, want := range map[string]string{
		secretA:                           "Secret a",
		operator:                          "the operator's CA",
		issuerB:                           "cert-manager Issuer b",
		"CertManager/example.com/Vault/v": "issuer example.com/Vault v",
	} {
		if got := Describe(id); got != want {
			t.Errorf("Describe(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestOperatorCAUnused(t *testing.T) {
	cases := []struct {
		name    string
		adopted string
		want    bool
	}{
		{"nothing recorded", "", false},
		{"on a source, settled or switching between sources", secretA, true},
		{"switching away from the operator's CA, pass 2 or 3: the members hold the source's certificate", issuerB, true},
		{"switching away from the operator's CA, before pass 2: the members hold its certificates", operator, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := OperatorCAUnused(tc.adopted); got != tc.want {
				t.Errorf("OperatorCAUnused(%q) = %v, want %v", tc.adopted, got, tc.want)
			}
		})
	}
}
