package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RootUser and RootRole are etcd's superuser and its built-in role; every
// call the operator makes (membership, maintenance, snapshots) needs the
// role once authentication is on.
const (
	RootUser = "root"
	RootRole = "root"
)

// AuthSetup is what turning authentication on creates.
type AuthSetup struct {
	// RootPassword becomes root's password. It is set again when root
	// exists already: with authentication off, whoever may reach the
	// cluster may set it anyway, and the Secret it comes from is what the
	// operator and its Jobs will authenticate with.
	RootPassword string
	// CertificateUsers get the root role without a password: they are the
	// common names of client certificates (the operator's) that identify
	// their holders to members that check client certificates. root needs
	// no entry.
	CertificateUsers []string
}

// AuthEnabled reports whether the cluster has authentication on. With it
// off etcd answers anyone; with it on, any identity (not only root).
func (c *client) AuthEnabled(ctx context.Context) (bool, error) {
	var enabled bool
	err := c.balanced(ctx, OpAuthStatus, func(ctx context.Context) error {
		resp, err := c.cli.AuthStatus(ctx)
		if err != nil {
			return err
		}
		enabled = resp.Enabled
		return nil
	})
	return enabled, err
}

// EnableAuth creates the root role and user (and the certificate users),
// grants them the role and turns authentication on. Every step accepts
// having been done before, so a pass that failed half way, or an operator
// restarted in between, just runs it again.
func (c *client) EnableAuth(ctx context.Context, setup AuthSetup) error {
	if setup.RootPassword == "" {
		return &CallError{Op: OpEnableAuth, Err: errors.New("root's password is empty")}
	}
	return c.balanced(ctx, OpEnableAuth, func(ctx context.Context) error {
		if _, err := c.cli.RoleAdd(ctx, RootRole); err != nil && !isEtcdErr(err, rpctypes.ErrRoleAlreadyExist) {
			return fmt.Errorf("failed to add the root role: %w", err)
		}
		_, err := c.cli.UserAdd(ctx, RootUser, setup.RootPassword)
		switch {
		case isEtcdErr(err, rpctypes.ErrUserAlreadyExist):
			if _, err := c.cli.UserChangePassword(ctx, RootUser, setup.RootPassword); err != nil {
				return fmt.Errorf("failed to set root's password: %w", err)
			}
		case err != nil:
			return fmt.Errorf("failed to add the root user: %w", err)
		}
		users := []string{RootUser}
		for _, u := range setup.CertificateUsers {
			if u == RootUser || u == "" {
				continue
			}
			_, err := c.cli.UserAddWithOptions(ctx, u, "", &clientv3.UserAddOptions{NoPassword: true})
			if err != nil && !isEtcdErr(err, rpctypes.ErrUserAlreadyExist) {
				return fmt.Errorf("failed to add user %s: %w", u, err)
			}
			users = append(users, u)
		}
		// Granting a role a user has already is accepted.
		for _, u := range users {
			if _, err := c.cli.UserGrantRole(ctx, u, RootRole); err != nil {
				return fmt.Errorf("failed to grant %s the root role: %w", u, err)
			}
		}
		// Enabling it again is accepted too.
		if _, err := c.cli.AuthEnable(ctx); err != nil {
			return fmt.Errorf("failed to turn authentication on: %w", err)
		}
		return nil
	})
}
