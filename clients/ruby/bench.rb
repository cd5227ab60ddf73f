# frozen_string_literal: true

# Measures the client's own cost per call against the bare round trip:
# ruby -Ilib bench.rb URL [CALLS] [PASSES]. The bare round trip is the
# least a Ruby program does for a decision: the request's bytes, prebuilt,
# written on a kept-alive socket, the answer read to the end of its
# Content-Length and its JSON parsed. The client's call is
# checked_insert("api", "bench"), which sends the same bytes. Each pass
# times CALLS of each, one after the other, in CPU time of this thread
# (CLOCK_THREAD_CPUTIME_ID: the interpreter's work and the system calls,
# not the wait for the service) and in wall time. The overhead of a pass
# is the client's CPU per call less the bare's; its share is that over
# the bare wall round trip. The medians of the passes are printed with
# their spread (min-max). The rule "api" must allow far more than CALLS a
# second (clients/testdata/bench.yaml); a denial stops the bench.
require "socket"
require "json"
require "sluice"

url, calls, passes = ARGV[0], (ARGV[1] || 2000).to_i, (ARGV[2] || 7).to_i
uri = URI(url)
body = '{"rule":"api","key":"bench","cost":1}'
req = "POST #{uri.path.chomp("/")}/v1/check HTTP/1.1\r\nHost: #{uri.host}:#{uri.port}\r\nContent-Type: application/json\r\n" \
      "Content-Length: #{body.bytesize}\r\n\r\n#{body}"
clock = lambda do
  [Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID), Process.clock_gettime(Process::CLOCK_MONOTONIC)]
end
finish = lambda do |start, n, allowed, who|
  abort "bench: #{who} was denied #{n - allowed} times of #{n}: raise rule api's limit" unless allowed == n
  clock.call.zip(start).map { |now, was| (now - was) / n }
end
bare = lambda do |n|
  s = TCPSocket.new(uri.host, uri.port)
  s.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
  allowed = 0
  start = clock.call
  n.times do
    s.write(req)
    data = s.readpartial(65_536)
    data << s.readpartial(65_536) until (head = data.index("\r\n\r\n"))
    i = data.index("\r\nContent-Length:") + 17
    want = head + 4 + data[i, data.index("\r\n", i) - i].to_i
    data << s.readpartial(65_536) while data.bytesize < want
    allowed += 1 if JSON.parse(data.byteslice(head + 4, want - head - 4))["allowed"]
  end
  finish.call(start, n, allowed, "the bare round trip")
ensure
  s&.close
end
client = lambda do |n|
  c = Sluice::Client.new(url, timeout: 5)
  c.checked_insert("api", "bench")
  allowed = 0
  start = clock.call
  n.times { allowed += 1 if c.checked_insert("api", "bench").allowed }
  finish.call(start, n, allowed, "the client")
ensure
  c&.close
end
bare.call(calls / 10 + 1) # warm up both paths
client.call(calls / 10 + 1)
rt = []
bcpu = []
ccpu = []
over = []
share = []
passes.times do
  b = bare.call(calls)
  c = client.call(calls)
  rt << b[1]
  bcpu << b[0]
  ccpu << c[0]
  over << c[0] - b[0]
  share << (c[0] - b[0]) / b[1]
end
spread = ->(x, scale) { s = x.sort; format("%.1f (%.1f-%.1f)", s[s.size / 2] * scale, s.first * scale, s.last * scale) }
puts "ruby: overhead #{spread.call(over, 1e6)} µs = #{spread.call(share, 100)}% of the round trip #{spread.call(rt, 1e6)} µs; " \
     "cpu per call: bare #{spread.call(bcpu, 1e6)} µs, client #{spread.call(ccpu, 1e6)} µs " \
     "(median (min-max) of #{passes} passes of #{calls} calls)"
