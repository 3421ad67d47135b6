package testcaddy

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"
)

// portCounts counts listener addresses per TCP port.
func portCounts(addrs [][2]string) map[int]int {
	out := map[int]int{}
	for _, a := range addrs {
		if !strings.HasPrefix(a[0], "tcp") {
			continue
		}
		_, p, err := net.SplitHostPort(a[1])
		if err != nil {
			continue
		}
		if port, err := strconv.Atoi(p); err == nil {
			out[port]++
		}
	}
	return out
}

// kernelListeners counts the sockets in LISTEN state on a local TCP port,
// as Linux lists them in /proc/net/tcp and tcp6 (each SO_REUSEPORT socket
// is a line of its own). ok is false where /proc does not tell.
func kernelListeners(port int) (n int, ok bool) {
	hexPort := strings.ToUpper(strconv.FormatInt(int64(port), 16))
	for len(hexPort) < 4 {
		hexPort = "0" + hexPort
	}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		ok = true
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st ...; local is HEXIP:HEXPORT
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			if i := strings.LastIndexByte(fields[1], ':'); i >= 0 && fields[1][i+1:] == hexPort {
				n++
			}
		}
		f.Close()
	}
	return n, ok
}
