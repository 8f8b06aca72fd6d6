package agent

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/certs"
	"github.com/quorumctl/etcd-operator/internal/etcd"
	etcdfake "github.com/quorumctl/etcd-operator/internal/etcd/fake"
)

// clientSecretDir writes what the snapshot Pod mounts from the operator's
// client certificate Secret.
func clientSecretDir(t *testing.T) string {
	t.Helper()
	now := time.Now()
	ca, err := certs.NewCA("client-ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := certs.Issue(ca, certs.LeafRequest{CommonName: "root", Client: true, Lifetime: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

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

func dialSecurity(t *testing.T, f *etcdfake.Fake) etcd.Security {
	t.Helper()
	for _, c := range f.Calls {
		if c.Op == etcd.OpDial {
			return c.Security
		}
	}
	t.Fatal("the agent never dialed")
	return etcd.Security{}
}

func TestSaveOnMutualTLSIsRootByItsCertificate(t *testing.T) {
	f, eps := threeMembers()
	f.SetAuth("secret-pw")
	f.SetClientCertAuth(true)
	var a EtcdTLSArgs
	a.InDir(clientSecretDir(t))
	res := runSaveMain(t, f, eps, a, nil)
	if res.Code != backup.CodeOK {
		t.Fatalf("result %+v, want OK", res)
	}
	sec := dialSecurity(t, f)
	if sec.TLS == nil || len(sec.TLS.Certificates) != 1 || sec.TLS.RootCAs == nil {
		t.Fatalf("dialed with TLS %+v; want the mounted client certificate and CA", sec.TLS)
	}
	if sec.Username != "" || sec.Password != "" {
		t.Fatalf("dialed as %q with a password; the certificate alone is root", sec.Username)
	}
}

func TestSaveWithAuthUsesRootsPasswordFromTheEnvironment(t *testing.T) {
	f, eps := threeMembers()
	f.SetAuth("secret-pw")
	res := runSaveMain(t, f, eps, EtcdTLSArgs{PasswordFrom: "ns/c-root"}, map[string]string{EnvEtcdPassword: "secret-pw\n"})
	if res.Code != backup.CodeOK {
		t.Fatalf("result %+v, want OK", res)
	}
	if sec := dialSecurity(t, f); sec.Username != etcd.RootUser || sec.Password != "secret-pw" {
		t.Fatalf("dialed as %q/%q; want root with the trimmed password", sec.Username, sec.Password)
	}
}

func TestSaveWithAuthAndNoPasswordNamesTheSecret(t *testing.T) {
	f, eps := threeMembers()
	f.SetAuth("secret-pw")
	res := runSaveMain(t, f, eps, EtcdTLSArgs{PasswordFrom: "ns/c-root"}, nil)
	if res.Code != backup.CodeEtcdError {
		t.Fatalf("result %+v, want EtcdError", res)
	}
	if want := "ns/c-root"; !strings.Contains(res.Message, want) {
		t.Fatalf("message %q does not name Secret %s", res.Message, want)
	}
	for _, c := range f.Calls {
		if c.Op == etcd.OpDial {
			t.Fatal("dialed without the password it needs")
		}
	}
}

func TestSaveUsesAPasswordItDoesNotRequire(t *testing.T) {
	f, eps := threeMembers()
	res := runSaveMain(t, f, eps, EtcdTLSArgs{}, map[string]string{EnvEtcdPassword: "pw"})
	if res.Code != backup.CodeOK {
		t.Fatalf("result %+v, want OK", res)
	}
	if sec := dialSecurity(t, f); sec.Username != etcd.RootUser || sec.Password != "pw" {
		t.Fatalf("dialed as %q; want root with the password it was given", sec.Username)
	}
	f, eps = threeMembers()
	if res := runSaveMain(t, f, eps, EtcdTLSArgs{}, nil); res.Code != backup.CodeOK {
		t.Fatalf("without a password and without --etcd-root-password-from: %+v, want OK", res)
	}
}

func TestSaveWithAWrongPasswordFails(t *testing.T) {
	f, eps := threeMembers()
	f.SetAuth("secret-pw")
	res := runSaveMain(t, f, eps, EtcdTLSArgs{PasswordFrom: "ns/c-root"}, map[string]string{EnvEtcdPassword: "wrong"})
	if res.Code != backup.CodeEtcdError {
		t.Fatalf("result %+v, want EtcdError", res)
	}
	if strings.Contains(res.Message, "wrong") {
		t.Fatalf("message %q leaks the password", res.Message)
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
	in.EtcdTLS.PasswordFrom = "ns/c-root"
	out, _, err := parseSave(in.Args()[2:], Env{Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if out.EtcdTLS != in.EtcdTLS {
		t.Fatalf("parsed %+v, want %+v", out.EtcdTLS, in.EtcdTLS)
	}
}
