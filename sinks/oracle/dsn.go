package oracle

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/sijms/go-ora/v2/configurations"
)

// Easy Connect: [tcp://|tcps://][//]host[:port][/service_name][:server][/instance_name].
// Host and service follow what go-ora's descriptor parser accepts
// (ExtractServers and its SERVICE_NAME pattern), so a string that passes
// here is one the driver can connect with.
var easyConnect = regexp.MustCompile(`^(?i:(tcps?)://)?(?://)?([A-Za-z0-9_.\-]+)(?::([0-9]{1,5}))?/([A-Za-z0-9_.\-]+)(?::(?i:(dedicated|shared|pooled)))?(?:/([A-Za-z0-9_.\-]+))?$`)

var (
	descService = regexp.MustCompile(`(?i)\(\s*(SERVICE_NAME|SID)\s*=\s*[\w.\-]+\s*\)`)
)

// parseDSN turns the dsn key into the connect descriptor handed to go-ora
// (its connStr option): a descriptor is used as it is, an Easy Connect
// string is expanded into the equivalent descriptor. Anything else would
// be a net service alias, which needs tnsnames.ora (config_dir): go-ora
// does not read it, so aliases are rejected with that reason.
func parseDSN(dsn string) (string, error) {
	dsn = strings.TrimSpace(dsn)
	if strings.HasPrefix(dsn, "(") {
		servers, err := configurations.ExtractServers(dsn)
		if err != nil || len(servers) == 0 {
			return "", errors.New("connect descriptor names no (ADDRESS=(HOST=…)(PORT=…))")
		}
		if !descService.MatchString(dsn) {
			return "", errors.New("connect descriptor names no SERVICE_NAME or SID")
		}
		if strings.Count(dsn, "(") != strings.Count(dsn, ")") {
			return "", errors.New("connect descriptor has unbalanced parentheses")
		}
		return dsn, nil
	}
	// Messages never quote the dsn: a string that is not a valid one may
	// be a user/password@host connect string, which carries the password.
	m := easyConnect.FindStringSubmatch(dsn)
	switch {
	case m == nil && strings.Contains(dsn, "@"):
		return "", errors.New("must be an Easy Connect string ([tcps://]host[:port]/service[:server][/instance]) or a connect descriptor, without credentials: set user and password_env (or password, password_file)")
	case m == nil && !strings.ContainsAny(dsn, "/:?()"):
		return "", fmt.Errorf("looks like a net service alias; aliases need config_dir, which is %s (use host[:port]/service or a connect descriptor)", notSupported)
	case m == nil:
		return "", errors.New("must be an Easy Connect string ([tcps://]host[:port]/service[:server][/instance]) or a connect descriptor")
	}
	proto, host, port, service, server, instance := strings.ToLower(m[1]), m[2], m[3], m[4], strings.ToUpper(m[5]), m[6]
	if proto == "" {
		proto = "tcp"
	}
	if port == "" {
		port = "1521"
	}
	if n, _ := strconv.Atoi(port); n < 1 || n > 65535 {
		return "", fmt.Errorf("port must be between 1 and 65535 (got %s)", port)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "(DESCRIPTION=(ADDRESS=(PROTOCOL=%s)(HOST=%s)(PORT=%s))(CONNECT_DATA=(SERVICE_NAME=%s)", proto, host, port, service)
	if server != "" {
		fmt.Fprintf(&b, "(SERVER=%s)", server)
	}
	if instance != "" {
		fmt.Fprintf(&b, "(INSTANCE_NAME=%s)", instance)
	}
	b.WriteString("))")
	return b.String(), nil
}

// driverURL builds go-ora's connection URL: credentials in the user-info
// (escaped by net/url, so any password works), the descriptor in connStr,
// and the wallet options. Keys are encoded by url.Values ("WALLET+PASSWORD"),
// which go-ora's url.Query decodes back to the spaced names it expects.
func driverURL(user, password, descriptor string, wallet, walletPassword string) string {
	q := url.Values{}
	q.Set("connStr", descriptor)
	if wallet != "" {
		q.Set("WALLET", wallet)
		if walletPassword != "" {
			q.Set("WALLET PASSWORD", walletPassword)
		}
	}
	u := url.URL{Scheme: "oracle", User: url.UserPassword(user, password), Host: ":0", Path: "/", RawQuery: q.Encode()}
	return u.String()
}
