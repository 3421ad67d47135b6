package caddyfile

import (
	"strconv"
	"time"

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

func parseRedis(d *caddyfile.Dispenser) (*redisconf.Config, error) {
	cfg := new(redisconf.Config)
	if d.NextArg() {
		cfg.URL = d.Val()
		if d.NextArg() {
			return nil, d.ArgErr()
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		args := d.RemainingArgs()
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
				return nil, d.Errf("redis addrs: want one or more host:port")
			}
			cfg.Addrs = args
		case "master_name":
			cfg.MasterName, err = one()
		case "cluster":
			cfg.Cluster = true
		case "tls":
			if len(args) != 0 {
				return nil, d.Errf("redis tls: takes no value, only an optional block")
			}
			if cfg.TLS, err = parseRedisTLS(d); err != nil {
				return nil, err
			}
		case "sentinel_username":
			cfg.SentinelUsername, err = one()
		case "sentinel_password":
			cfg.SentinelPassword, err = one()
		case "pool_size":
			var v string
			if v, err = one(); err == nil {
				if cfg.PoolSize, err = strconv.Atoi(v); err != nil || cfg.PoolSize <= 0 {
					return nil, d.Errf("redis pool_size: want a number > 0, got %q", v)
				}
			}
		case "username":
			cfg.Username, err = one()
		case "password":
			cfg.Password, err = one()
		case "db":
			var v string
			if v, err = one(); err == nil {
				if cfg.DB, err = strconv.Atoi(v); err != nil || cfg.DB < 0 {
					return nil, d.Errf("redis db: want a number >= 0, got %q", v)
				}
			}
		case "dial_timeout", "read_timeout", "write_timeout":
			var v string
			if v, err = one(); err == nil {
				var dur time.Duration
				if dur, err = syntax.ParseDuration(v); err != nil {
					return nil, d.Errf("redis %s %s: %v", opt, v, err)
				}
				if dur <= 0 {
					return nil, d.Errf("redis %s: want a positive duration, got %q", opt, v)
				}
				switch opt {
				case "dial_timeout":
					cfg.DialTimeout = syntax.Duration(dur)
				case "read_timeout":
					cfg.ReadTimeout = syntax.Duration(dur)
				default:
					cfg.WriteTimeout = syntax.Duration(dur)
				}
			}
		default:
			return nil, rulestore.UnknownField(d, "rulestore redis", opt, "url", "addrs", "master_name", "sentinel_username",
				"sentinel_password", "cluster", "username", "password", "db", "tls", "pool_size", "dial_timeout", "read_timeout", "write_timeout")
		}
		if err != nil {
			return nil, err
		}
	}
	if cfg.URL == "" && len(cfg.Addrs) == 0 {
		return nil, d.Errf("redis: give a URL or addrs")
	}
	return cfg, nil
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
