# frozen_string_literal: true

# Counts the client's own instructions per call, free of the machine's
# load: ruby -Ilib count.rb [CALLS] (runs itself under valgrind).
#
# Both the client's checked_insert("api", "bench") and bench.rb's bare
# round trip run against a stub socket that takes the request and gives
# back, at once, the answer sluice serve gives it (bytes captured from
# one). Each is run twice, for 0 and for CALLS calls, in a child process
# under valgrind --tool=cachegrind --cache-sim=no; the difference of the
# two counts over CALLS is the instructions of one call, without the
# interpreter's start. The client's less the bare's is its own work; the
# objects each allocates a call are printed too.
require "json"
require "rbconfig"
require "tmpdir"

REQUEST = "POST /v1/check HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Type: application/json\r\n" \
          "Content-Length: 37\r\n\r\n{\"rule\":\"api\",\"key\":\"bench\",\"cost\":1}"
ANSWER = "HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Type: application/json\r\n" \
         "Ratelimit: \"api\";r=999999999;t=1\r\nRatelimit-Policy: \"api\";q=1000000000;w=1\r\n" \
         "Date: Sat, 28 Nov 2026 10:59:24 GMT\r\nContent-Length: 131\r\n\r\n" \
         "{\"allowed\":true,\"rule\":\"api\",\"limit\":1000000000,\"policy\":\"1000000000/s\",\"remaining\":999999999," \
         "\"reset_after\":0.001,\"retry_after\":0}\n".b

# A connected socket whose every request is answered at once.
class Stub
  def write(data)
    raise "sent #{data.inspect}" unless data == REQUEST

    data.bytesize
  end

  def readpartial(_max, buf = nil)
    buf ? buf.replace(ANSWER) : ANSWER.dup
  end

  def close; end
end

def client(calls)
  require "sluice"
  c = Sluice::Client.new("http://127.0.0.1:1", timeout: 5)
  conn = Sluice::Connection.allocate
  conn.instance_variable_set(:@sock, Stub.new)
  conn.instance_variable_set(:@buf, String.new)
  conn.instance_variable_set(:@chunk, String.new(capacity: 65_536, encoding: Encoding::BINARY))
  c.send(:checkin, conn)
  calls.times { c.checked_insert("api", "bench").allowed or raise "denied" }
end

def bare(calls)
  s = Stub.new
  calls.times do # bench.rb's bare round trip
    s.write(REQUEST)
    data = s.readpartial(65_536)
    data << s.readpartial(65_536) until (head = data.index("\r\n\r\n"))
    i = data.index("\r\nContent-Length:") + 17
    want = head + 4 + data[i, data.index("\r\n", i) - i].to_i
    data << s.readpartial(65_536) while data.bytesize < want
    JSON.parse(data.byteslice(head + 4, want - head - 4))["allowed"] or raise "denied"
  end
end

def count(what, calls)
  Dir.mktmpdir do |tmp|
    out = File.join(tmp, "cg.out")
    system("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=#{out}", RbConfig.ruby,
           "-I#{$LOAD_PATH.find { |d| File.exist?(File.join(d, "sluice.rb")) }}", __FILE__, "--run", what, calls.to_s,
           out: File::NULL, err: File::NULL, exception: true)
    File.read(out)[/^summary:\s+(\d+)/, 1].to_i
  end
end

if ARGV[0] == "--run"
  send(ARGV[1], ARGV[2].to_i)
  exit
end
calls = (ARGV[0] || 2000).to_i
per = %w[bare client].to_h { |what| [what, (count(what, calls) - count(what, 0)).fdiv(calls)] }
objects = %w[bare client].to_h do |what|
  send(what, 10)
  before = GC.stat(:total_allocated_objects)
  send(what, calls)
  [what, (GC.stat(:total_allocated_objects) - before).fdiv(calls)]
end
printf("ruby: instructions per call: client %<c>d, bare %<b>d, own %<o>d; objects per call: client %<co>.0f, bare %<bo>.0f " \
       "(stub socket, %<n>d calls, cachegrind)\n",
       c: per["client"], b: per["bare"], o: per["client"] - per["bare"], co: objects["client"], bo: objects["bare"], n: calls)
