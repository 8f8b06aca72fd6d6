package agent

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/certs/certstest"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// runSaveMain runs snapshot save through Main against f, with the Pod's
// arguments and environment, into a volume.
func runSaveMain(t *testing.T, f *etcdfake.Fake, eps []string, tlsArgs EtcdTLSArgs, env map[string]string) backup.Result {
	t.Helper()
	old := dialer
	dialer = f
	t.Cleanup(func() { dialer = old })
	mount := t.TempDir()
	a := saveArgs(eps)
	a.Destination = v1alpha1.SnapshotDestination{PersistentVolumeClaim: &v1alpha1.PVCDestination{ClaimName: "c"}}
	a.PVCMount = mount
	a.EtcdTLS = tlsArgs
	logPath := filepath.Join(t.TempDir(), "termination")
	args := append(a.Args()[2:], "--termination-log="+logPath)
	Main(context.Background(), append([]string{"snapshot", "save"}, args...), Env{
		Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return env[k] },
	})
	return readResult(t, logPath)
}

func dialSettings(t *testing.T, f *etcdfake.Fake) etcd.DialSettings {
	t.Helper()
	for _, c := range f.Calls {
		if c.Op == etcd.OpDial {
			return c.Dial
		}
	}
	t.Fatal("the agent never dialed")
	return etcd.DialSettings{}
}

func TestSaveOnTLSPresentsTheMountedCertificate(t *testing.T) {
	f, eps := threeMembers()
	var a EtcdTLSArgs
	a.InDir(certstest.SecretDir(t, certstest.CA(t, "client-ca"), "root"))
	res := runSaveMain(t, f, eps, a, nil)
	if res.Code != backup.CodeOK {
		t.Fatalf("result %+v, want OK", res)
	}
	d := dialSettings(t, f)
	if d.TLS == nil || len(d.TLS.Certificates) != 1 || d.TLS.RootCAs == nil {
		t.Fatalf("dialed with TLS %+v; want the mounted client certificate and CA", d.TLS)
	}
}

func TestSaveWithoutTLSArgsDialsPlaintext(t *testing.T) {
	f, eps := threeMembers()
	if res := runSaveMain(t, f, eps, EtcdTLSArgs{}, nil); res.Code != backup.CodeOK {
		t.Fatalf("result %+v, want OK", res)
	}
	if d := dialSettings(t, f); d.TLS != nil {
		t.Fatalf("dialed with TLS %+v; want none", d.TLS)
	}
}

func TestSaveWithUnreadableTLSFilesIsInvalidArguments(t *testing.T) {
	f, eps := threeMembers()
	var a EtcdTLSArgs
	a.InDir(filepath.Join(t.TempDir(), "missing"))
	res := runSaveMain(t, f, eps, a, nil)
	if res.Code != backup.CodeInvalidArguments || !strings.Contains(res.Message, "--etcd-cacert") {
		t.Fatalf("result %+v, want InvalidArguments naming --etcd-cacert", res)
	}
}

func TestEtcdTLSArgsRoundTrip(t *testing.T) {
	in := saveArgs([]string{"https://a:2379"})
	in.EtcdTLS.InDir(DefaultEtcdTLSDir)
	out, _, err := parseSave(in.Args()[2:], Env{Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if out.EtcdTLS != in.EtcdTLS {
		t.Fatalf("parsed %+v, want %+v", out.EtcdTLS, in.EtcdTLS)
	}
}

// With authentication on, the agent reads root's password from the
// mounted file and dials as root; a wrong one is a failed snapshot whose
// message does not repeat it.
func TestSaveAuthenticatesWithTheMountedPassword(t *testing.T) {
	f, eps := threeMembers()
	f.SetAuth(map[string]string{"root": "roots-pw"})
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("roots-pw"), 0o400); err != nil {
		t.Fatal(err)
	}
	if res := runSaveMain(t, f, eps, EtcdTLSArgs{PasswordFile: file}, nil); res.Code != backup.CodeOK {
		t.Fatalf("result %+v, want OK", res)
	}
	if d := dialSettings(t, f); d.Credentials != (etcd.Credentials{User: "root", Password: "roots-pw"}) {
		t.Fatalf("dialed as %v; want root with the mounted password", d.Credentials)
	}

	f, eps = threeMembers()
	f.SetAuth(map[string]string{"root": "roots-pw"})
	if err := os.WriteFile(file, []byte("guessed"), 0o400); err != nil {
		t.Fatal(err)
	}
	res := runSaveMain(t, f, eps, EtcdTLSArgs{PasswordFile: file}, nil)
	if res.Code == backup.CodeOK || strings.Contains(res.Message, "guessed") {
		t.Fatalf("result %+v, want a failure that does not name the password", res)
	}
	if res := runSaveMain(t, f, eps, EtcdTLSArgs{PasswordFile: filepath.Join(t.TempDir(), "none")}, nil); res.Code != backup.CodeInvalidArguments {
		t.Fatalf("result %+v, want InvalidArguments for a missing password file", res)
	}
}
