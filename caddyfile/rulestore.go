package caddyfile

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/redisconf"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// parseRulestore parses the global option:
//
//	rulestore {
//		redis <url> | redis { url|addrs|master_name|sentinel_username|sentinel_password|cluster|username|password|db|pool_size|dial_timeout|read_timeout|write_timeout ...
//			tls [{ ca <file>...; client_auth <cert_file> <key_file>; server_name <name>; insecure_skip_verify }] }
//		prefix <string>
//		resync <duration>
//		rate_limit|circuit_breaker|gray|binding|<registered kind> <id> { <field> <value...> ... }
//	}
func parseRulestore(d *caddyfile.Dispenser, _ any) (any, error) {
	app := new(rulestore.App)
	var declared []declaredRule
	d.Next() // option name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for d.NextBlock(0) {
		switch opt := d.Val(); opt {
		case "redis":
			cfg, err := parseRedis(d)
			if err != nil {
				return nil, err
			}
			app.Redis = cfg
		case "prefix":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			app.Prefix = d.Val()
		case "resync":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			dur, err := syntax.ParseDuration(d.Val())
			if err != nil {
				return nil, d.Errf("resync %s: %v", d.Val(), err)
			}
			if dur <= 0 {
				return nil, d.Errf("resync: want a positive duration, got %q", d.Val())
			}
			app.Resync = syntax.Duration(dur)
		default:
			kind, ok := rulestore.ParseKind(opt)
			if !ok {
				known := []string{"redis", "prefix", "resync"}
				for _, k := range rulestore.Kinds() {
					known = append(known, k.String())
				}
				return nil, rulestore.UnknownField(d, "rulestore", opt, known...)
			}
			if !d.NextArg() {
				return nil, d.Errf("%s needs an id", opt)
			}
			id := d.Val()
			if err := rulestore.ValidID(id); err != nil {
				return nil, d.Errf("%s: %v", opt, err)
			}
			if app.Declared(kind, id) {
				return nil, d.Errf("%s rule %q declared twice", opt, id)
			}
			idTok := d.Token()
			fields, lines, err := rulestore.UnmarshalFieldsTokens(d, kind, id)
			if err != nil {
				return nil, err
			}
			declared = append(declared, declaredRule{kind, id, idTok, lines})
			if err := app.Declare(kind, id, fields); err != nil {
				return nil, rulestore.ErrAtField(idTok, lines, err, "%s rule %q: %v", kind, id, err)
			}
		}
	}
	if err := checkRefs(app, declared); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "rulestore", Value: caddyconfig.JSON(app, nil)}, nil
}

// declaredRule is where a static rule was declared, for errors found after
// the whole block is read.
type declaredRule struct {
	kind  rulestore.Kind
	id    string
	idTok caddyfile.Token
	lines map[string]caddyfile.Token
}

// checkRefs fails a binding or gray rule (fallback_on_open) that names a
// rule the block does not declare, when there is no Redis to supply it: a
// typo caught by `caddy validate`, at the referring field's line.
func checkRefs(app *rulestore.App, rules []declaredRule) error {
	if app.Redis != nil {
		return nil
	}
	known := rulestore.DeclaredBy(app)
	for _, r := range rules {
		v, err := rulestore.Parse(r.kind, r.id, known.Fields(r.kind, r.id))
		if err != nil {
			return err // already checked field by field while reading
		}
		if err := rulestore.CheckRefs(known, v); err != nil {
			return rulestore.ErrAtField(r.idTok, r.lines, err, "%s %q: %v", r.kind, r.id, err)
		}
	}
	return nil
}

// parseRedis reads `redis [<url>] { ... }`: the store's connection.
func parseRedis(d *caddyfile.Dispenser) (*redisconf.Config, error) {
	cfg := new(redisconf.Config)
	if d.NextArg() {
		cfg.URL = d.Val()
		if d.NextArg() {
			return nil, d.ArgErr()
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := parseRedisOption(d, cfg, d.Val(), d.RemainingArgs()); err != nil {
			return nil, err
		}
	}
	if cfg.URL == "" && len(cfg.Addrs) == 0 {
		return nil, d.Errf("redis: give a URL or addrs")
	}
	return cfg, nil
}

// parseRedisOption reads one line of the redis block, opt args, into cfg.
func parseRedisOption(d *caddyfile.Dispenser, cfg *redisconf.Config, opt string, args []string) error {
	one := func() (string, error) {
		if len(args) != 1 {
			return "", d.Errf("redis %s: want one value", opt)
		}
		return args[0], nil
	}
	var err error
	switch opt {
	case "url":
		cfg.URL, err = one()
	case "addrs":
		if len(args) == 0 {
			return d.Errf("redis addrs: want one or more host:port")
		}
		cfg.Addrs = args
	case "master_name":
		cfg.MasterName, err = one()
	case "cluster":
		cfg.Cluster = true
	case "tls":
		if len(args) != 0 {
			return d.Errf("redis tls: takes no value, only an optional block")
		}
		cfg.TLS, err = parseRedisTLS(d)
	case "sentinel_username":
		cfg.SentinelUsername, err = one()
	case "sentinel_password":
		cfg.SentinelPassword, err = one()
	case "pool_size":
		cfg.PoolSize, err = redisWhole(d, one, 1, "redis pool_size: want a number > 0")
	case "username":
		cfg.Username, err = one()
	case "password":
		cfg.Password, err = one()
	case "db":
		cfg.DB, err = redisWhole(d, one, 0, "redis db: want a number >= 0")
	case "dial_timeout":
		cfg.DialTimeout, err = redisTimeout(d, opt, one)
	case "read_timeout":
		cfg.ReadTimeout, err = redisTimeout(d, opt, one)
	case "write_timeout":
		cfg.WriteTimeout, err = redisTimeout(d, opt, one)
	default:
		return rulestore.UnknownField(d, "rulestore redis", opt, "url", "addrs", "master_name", "sentinel_username",
			"sentinel_password", "cluster", "username", "password", "db", "tls", "pool_size", "dial_timeout", "read_timeout", "write_timeout")
	}
	return err
}

// redisWhole is an option's one value as a whole number from least; want
// starts the error otherwise.
func redisWhole(d *caddyfile.Dispenser, one func() (string, error), least int, want string) (int, error) {
	v, err := one()
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		return 0, d.Errf("%s, got %q", want, v)
	}
	return n, nil
}

// redisTimeout is a timeout option's one value, a positive duration.
func redisTimeout(d *caddyfile.Dispenser, opt string, one func() (string, error)) (syntax.Duration, error) {
	v, err := one()
	if err != nil {
		return 0, err
	}
	dur, err := syntax.ParseDuration(v)
	if err != nil {
		return 0, d.Errf("redis %s %s: %v", opt, v, err)
	}
	if dur <= 0 {
		return 0, d.Errf("redis %s: want a positive duration, got %q", opt, v)
	}
	return syntax.Duration(dur), nil
}

// parseRedisTLS reads the optional block after `tls` in a redis block; the
// dispenser is at `tls`. Without a block TLS uses the system's CAs.
func parseRedisTLS(d *caddyfile.Dispenser) (*redisconf.TLS, error) {
	t := new(redisconf.TLS)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		args := d.RemainingArgs()
		switch opt {
		case "ca":
			if len(args) == 0 {
				return nil, d.Errf("redis tls ca: want one or more PEM files")
			}
			t.CAFiles = append(t.CAFiles, args...)
		case "client_auth":
			if len(args) != 2 {
				return nil, d.Errf("redis tls client_auth: want <cert_file> <key_file>")
			}
			t.ClientCertificateFile, t.ClientCertificateKeyFile = args[0], args[1]
		case "server_name":
			if len(args) != 1 {
				return nil, d.Errf("redis tls server_name: want one name")
			}
			t.ServerName = args[0]
		case "insecure_skip_verify":
			if len(args) != 0 {
				return nil, d.Errf("redis tls insecure_skip_verify: takes no value")
			}
			t.InsecureSkipVerify = true
		default:
			return nil, rulestore.UnknownField(d, "rulestore redis tls", opt, "ca", "client_auth", "server_name", "insecure_skip_verify")
		}
	}
	return t, nil
}
