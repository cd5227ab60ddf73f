# frozen_string_literal: true

# Measures the client's own cost per call against the bare round trip:
# ruby -Ilib bench.rb URL [CALLS] [PASSES]. The bare round trip sends a
# prepared POST /v1/check on a kept-alive socket and reads the answer;
# the client's call (checked_insert) does the same through the client and
# builds its Decision. Passes alternate; the medians are printed. The rule
# "api" must allow far more than CALLS a second.
require "socket"
require "sluice"

url, calls, passes = ARGV[0], (ARGV[1] || 2000).to_i, (ARGV[2] || 7).to_i
uri = URI(url)
body = '{"rule":"api","key":"bench","cost":1}'
req = "POST /v1/check HTTP/1.1\r\nHost: #{uri.host}:#{uri.port}\r\nContent-Type: application/json\r\n" \
      "Content-Length: #{body.bytesize}\r\n\r\n#{body}"
now = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
bare = lambda do
  s = TCPSocket.new(uri.host, uri.port)
  s.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
  t = now.call
  calls.times do
    s.write(req)
    len = 0
    while (line = s.gets) != "\r\n"
      len = line[15..].to_i if line.downcase.start_with?("content-length:")
    end
    s.read(len)
  end
  (now.call - t) / calls
ensure
  s&.close
end
client = lambda do
  c = Sluice::Client.new(url, timeout: 5)
  c.checked_insert("api", "bench")
  t = now.call
  calls.times { c.checked_insert("api", "bench") }
  (now.call - t) / calls
ensure
  c&.close
end
b = []
c = []
passes.times do
  b << bare.call
  c << client.call
end
mb = b.sort[passes / 2] * 1e6
mc = c.sort[passes / 2] * 1e6
printf("ruby: round trip %.1f µs, client %.1f µs, overhead %.1f µs = %.1f%% (median of %d passes of %d calls)\n",
       mb, mc, mc - mb, (mc - mb) / mb * 100, passes, calls)
