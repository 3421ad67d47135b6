// Package redisconf owns how Sluice reaches Redis: the `redis` settings of
// the rulestore app (standalone, Sentinel or Cluster; ACL users; TLS with
// CA and client certificate files; pool size and timeouts) and their
// translation into go-redis options, with an error naming the setting for
// a bad value (redisconfig.go). It opens no connection: the rulestore
// makes and shares the client.
package redisconf
