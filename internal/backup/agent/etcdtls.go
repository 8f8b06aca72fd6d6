package agent

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"

	"github.com/quorumctl/etcd-operator/internal/backup"
	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// Where the snapshot Pod mounts the operator's client certificate of a TLS
// cluster: a kubernetes.io/tls Secret with the client trust bundle beside.
const (
	DefaultEtcdTLSDir = "/etc/quorumctl/etcd-client"
	etcdCAName        = "ca.crt"
	etcdCertName      = "tls.crt"
	etcdKeyName       = "tls.key"
	// DefaultEtcdRootDir is where the snapshot Pod mounts root's password
	// when it authenticates with it (the key password of the root Secret).
	DefaultEtcdRootDir = "/etc/quorumctl/etcd-root"
)

// EtcdTLSArgs say how to reach the members: CAFile verifies https
// endpoints, CertFile and KeyFile are presented to them (all empty dials
// plaintext). PasswordFile holds root's password when etcd's
// authentication is on and no client certificate names the user; it is a
// file, never a flag's value, so that the password is on no command line.
type EtcdTLSArgs struct {
	CAFile, CertFile, KeyFile string
	PasswordFile              string
}

// InDir points the arguments at a mounted client certificate Secret.
func (a *EtcdTLSArgs) InDir(dir string) {
	a.CAFile, a.CertFile, a.KeyFile = dir+"/"+etcdCAName, dir+"/"+etcdCertName, dir+"/"+etcdKeyName
}

func (a EtcdTLSArgs) flags() []string {
	var out []string
	for _, f := range [][2]string{{"etcd-cacert", a.CAFile}, {"etcd-cert", a.CertFile}, {"etcd-key", a.KeyFile}, {"etcd-password-file", a.PasswordFile}} {
		if f[1] != "" {
			out = append(out, "--"+f[0]+"="+f[1])
		}
	}
	return out
}

func etcdTLSFlags(fs *flag.FlagSet, a *EtcdTLSArgs) {
	fs.StringVar(&a.CAFile, "etcd-cacert", "", "PEM bundle of the CAs that sign the members' client-port certificates")
	fs.StringVar(&a.CertFile, "etcd-cert", "", "PEM client certificate presented to the members")
	fs.StringVar(&a.KeyFile, "etcd-key", "", "PEM key of --etcd-cert")
	fs.StringVar(&a.PasswordFile, "etcd-password-file", "", "file with root's password, to authenticate as root")
}

// dialOptions are the TLS of the dial to the members.
// Unreadable files are an error of the Job's making, so they are reported
// as invalid arguments, naming the file.
func (a EtcdTLSArgs) dialOptions() ([]etcd.DialOption, error) {
	var opts []etcd.DialOption
	if a.CAFile != "" || a.CertFile != "" || a.KeyFile != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if a.CAFile != "" {
			pem, err := os.ReadFile(a.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%w: failed to read --etcd-cacert: %v", backup.ErrInvalidArguments, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: --etcd-cacert %s holds no PEM certificate", backup.ErrInvalidArguments, a.CAFile)
			}
			cfg.RootCAs = pool
		}
		if a.CertFile != "" || a.KeyFile != "" {
			pair, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("%w: failed to load the client certificate --etcd-cert/--etcd-key: %v", backup.ErrInvalidArguments, err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, etcd.WithClientTLS(cfg))
	}
	if a.PasswordFile != "" {
		pw, err := os.ReadFile(a.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("%w: failed to read --etcd-password-file: %v", backup.ErrInvalidArguments, err)
		}
		if len(pw) == 0 {
			return nil, fmt.Errorf("%w: --etcd-password-file %s is empty", backup.ErrInvalidArguments, a.PasswordFile)
		}
		opts = append(opts, etcd.WithPassword(etcd.RootUser, string(pw)))
	}
	return opts, nil
}
