# frozen_string_literal: true

# The client against a real sluice serve: the shared script, and a service
# that is down, slow or answers garbage.
class ClientTest < Minitest::Test
  def setup
    @server = Support::Server.new
    @client = Sluice::Client.new(@server.url, timeout: 5)
  end

  def teardown
    @client.close
    @server.stop
  end

  # Plays one call of the script (check is a peek here, as in the seed;
  # checked_insert takes); nil for an op this client lacks.
  def play(call)
    rule = call["rule"].to_s
    key = call["key_hex"] ? [call["key_hex"]].pack("H*") : call["key"].to_s
    cost = call["cost"] || 1
    decided = lambda do |d, outcome = false|
      h = { "allowed" => d.allowed, "remaining" => d.remaining, "limit" => d.limit, "waits" => d.retry_after.positive? }
      outcome ? h.merge("duplicate" => d.duplicate) : h
    end
    case call["op"]
    when "check" then decided.call(@client.checked_insert(rule, key, cost: cost))
    when "peek" then decided.call(@client.check(rule, key))
    when "insert" then decided.call(@client.insert(rule, key, cost: cost))
    when "reset" then @client.reset(rule, key) || {}
    when "reserve", "commit", "refund" then decided.call(@client.public_send(call["op"], rule, key, call["id"], cost: cost), true)
    when "report" then decided.call(@client.report(rule, key, call["id"], outcome: call["outcome"], cost: cost), true)
    end
  rescue Sluice::InvalidRequest => e
    assert_includes e.message, "'#{rule}'", "the error names the rule"
    { "error" => "invalid" }
  end

  def test_script
    played = 0
    Support.script["calls"].each_with_index do |call, i|
      got = play(call)
      next if got.nil?

      played += 1
      assert_equal call["want"].sort.to_h, got.sort.to_h, "call #{i} #{call}"
    end
    assert_operator played, :>, 30
    assert_equal 1, @client.instance_variable_get(:@idle).size, "one kept-alive connection"
  end

  def test_checked_insert_with_a_block
    3.times { assert_equal :done, @client.checked_insert("login", "k") { :done } }
    e = assert_raises(Sluice::RateLimited) { @client.checked_insert("login", "k") { flunk "ran over the limit" } }
    assert_operator e.retry_after, :>, 1000
    assert_match(/rule 'login' over its limit 3\/h; retry in 1[12]\d\ds/, e.message)
  end

  def test_misconfigured_rule
    %i[check insert checked_insert].each do |m|
      e = assert_raises(Sluice::InvalidRequest) { @client.public_send(m, "logn", "k") }
      assert_match(/rule 'logn'.*unknown rule/, e.message)
      assert_equal 400, e.status
    end
  end

  def test_keys_of_any_bytes
    ["\x00\xff".b, "\xc3".b, "ключ", "k" * 50_000, :symbol, 42].each do |key|
      assert @client.checked_insert("api", key).allowed, key.to_s[0, 8].inspect
    end
    assert_equal "a\uFFFD\uFFFDb\uFFFD", Sluice::Client.normalize_key("a\xe2\x9cb\xff".b)
    e = assert_raises(Sluice::InvalidRequest) { @client.checked_insert("api", "k" * 70_000) }
    assert_equal 413, e.status
  end

  # The bodies the client writes itself are JSON.generate's, byte for
  # byte, for keys of any bytes and rules and costs of any kind.
  def test_bodies_as_json_generate_writes
    keys = (0..255).map { |b| b.chr.b } +
           ["\u2028/\u007f", "a\"b\\c\u0000\u001f", "ключ", "\r\n\t\b\f", "\xff\xfe".b, "\xc3".b, "\xc3\xa9".b,
            "é".encode("ISO-8859-1"), "k" * 70_000, :sym, 42] +
           Array.new(200) { Random.bytes(rand(40)) }
    keys.each do |key|
      ["api", "r\"x\n", :api, "é", "\xff".b].each do |rule|
        [1, -3, 2.5].each do |cost|
          { "}" => {}, Sluice::Client::PEEK => { peek: true } }.each do |tail, more|
            want = JSON.generate({ rule: rule, key: Sluice::Client.normalize_key(key), cost: cost, **more })
          rescue JSON::GeneratorError
            next # nor does the client send it
          else
            got = @client.send(:body, rule, key, cost, tail)
            assert_equal want, got, "body(#{rule.inspect}, #{key.to_s[0, 20].inspect}, #{cost}, #{tail})"
            assert_equal want.encoding, got.encoding
          end
        end
      end
    end
  end

  def test_down_slow_garbage
    dead = Support::BadServer.new(nil)
    dead_url = dead.url
    dead.close
    answers = [nil, Support.http_answer("200 OK", "<html>a proxy</html>", "text/html"),
               Support.http_answer("200 OK", '{"rule":"login"}'), Support.http_answer("200 OK", "[1]"),
               Support.http_answer("502 Bad Gateway", "down", "text/plain"), "SSH-2.0-OpenSSH_9.2\r\n",
               "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"allowed\":"]
    servers = answers.map { |a| Support::BadServer.new(a) }
    [dead_url, *servers.map(&:url)].each do |url|
      { open: true, closed: false }.each do |failure, allowed|
        c = Sluice::Client.new(url, timeout: 0.3, failure: failure)
        # Bounded as in test_watchdog: a call its timeout failed to end
        # would hang here, and a loaded machine may take seconds longer.
        d = Timeout.timeout(10) { c.checked_insert("login", "k") }
        assert_equal allowed, d.allowed, "#{url} failing #{failure}"
        assert_kind_of Sluice::Unavailable, d.error
        assert_raises(Sluice::Unavailable) { c.commit("login", "k", "id-1") } if url == dead_url
        c.close
      end
    end
  ensure
    servers&.each(&:close)
  end

  # The Watchdog ends a call past its deadline wherever it waits: for an
  # answer that never comes, and in a write the service does not read
  # (a 16 MiB key); after its thread rested for want of calls; and in
  # the child of a fork, where its thread does not run until the child's
  # first call starts it again. (A call it failed to end would hang: each
  # is bounded here.)
  def test_watchdog
    silent = Support::BadServer.new(nil)
    c = Sluice::Client.new(silent.url, timeout: 0.3)
    timed_out = lambda do |key, what|
      d = Timeout.timeout(10) { c.checked_insert("login", key) }
      assert_kind_of Sluice::Unavailable, d.error, what
      assert_match(/no answer within 0.3s/, d.error.message, what)
    end
    timed_out.call("k", "an answer")
    timed_out.call("k" * (16 << 20), "a write")
    Timeout.timeout(10) { sleep 0.01 while Sluice::Watchdog.instance_variable_get(:@awake) }
    timed_out.call("k", "the first call after a rest")
    assert_operator Sluice::Watchdog.tick, :<=, 0.03
    pid = fork do
      d = c.checked_insert("login", "k")
      exit!(d.error&.message&.include?("no answer within 0.3s") ? 0 : 1)
    end
    _, status = Timeout.timeout(10) { Process.wait2(pid) }
    assert_predicate status, :success?, "the child's call ended by its timeout"
  ensure
    Process.kill("KILL", pid) if pid && !status
    c&.close
    silent&.close
  end

  # Over TLS: sluice serve with a certificate for 127.0.0.1 (which this
  # test has the process trust) decides the client's calls, and a TLS
  # service that never answers is ended at the timeout by the Watchdog,
  # which shuts down the socket under the TLS session.
  def test_https
    Dir.mktmpdir do |dir|
      key = OpenSSL::PKey::RSA.new(2048)
      cert = Support.self_signed(key, "127.0.0.1")
      OpenSSL::SSL::SSLContext::DEFAULT_CERT_STORE.add_cert(cert)
      File.write(crt = File.join(dir, "tls.crt"), cert.to_pem)
      File.write(pem = File.join(dir, "tls.key"), key.to_pem)
      File.write(config = File.join(dir, "sluice.yaml"),
                 "#{File.read(File.join(Support::TESTDATA, "sluice.yaml"))}\ntls: {cert_file: #{crt}, key_file: #{pem}}\n")
      server = Support::Server.new(config)
      assert_match(%r{\Ahttps://127\.0\.0\.1:\d+\z}, server.url)
      c = Sluice::Client.new(server.url, timeout: 5)
      2.times { |i| assert_equal [true, 2 - i, nil], c.checked_insert("login", "tls").then { |d| [d.allowed, d.remaining, d.error] } }
      # A child leaves the parent's TLS session alone (no close_notify).
      parents = c.instance_variable_get(:@idle).dup
      assert_forked_child_decides(c, parents)
      assert_equal [true, 0, nil], c.checked_insert("login", "tls").then { |d| [d.allowed, d.remaining, d.error] }
      assert_equal parents, c.instance_variable_get(:@idle), "the parent's TLS connection, still kept"
      c.close

      ctx = OpenSSL::SSL::SSLContext.new
      ctx.cert = cert
      ctx.key = key
      silent = OpenSSL::SSL::SSLServer.new(TCPServer.new("127.0.0.1", 0), ctx)
      held = []
      accepting = Thread.new do
        loop { held << silent.accept.tap { |s| s.readpartial(65_536) } }
      rescue IOError, SystemCallError, OpenSSL::SSL::SSLError
        nil
      end
      c = Sluice::Client.new("https://127.0.0.1:#{silent.to_io.addr[1]}", timeout: 0.3)
      d = Timeout.timeout(10) { c.checked_insert("login", "k") }
      assert_kind_of Sluice::Unavailable, d.error
      assert_match(/no answer within 0.3s/, d.error.message)
      assert_equal 1, held.size, "the request was read: the call waited for the answer"
    ensure
      c&.close
      server&.stop
      silent&.close
      held&.each(&:close)
      accepting&.join(1)
    end
  end

  # A forked child does not use the connections its parent kept (they
  # would read each other's answers): it makes its own, its decisions are
  # its keys', and the parent's connection still serves the parent.
  def test_fork_leaves_the_parents_connections
    assert_nil @client.checked_insert("login", "parent").error
    parents = @client.instance_variable_get(:@idle).dup
    assert_equal 1, parents.size
    assert_forked_child_decides(@client, parents)
    d = @client.checked_insert("login", "parent")
    assert_equal [nil, 1], [d.error, d.remaining]
    assert_equal parents, @client.instance_variable_get(:@idle), "the parent's connection, still kept"
  end

  # Forks, and in the child decides a key of its own with client, which
  # must not use a connection of parents.
  def assert_forked_child_decides(client, parents)
    pid = fork do
      d = client.checked_insert("login", "child")
      idle = client.instance_variable_get(:@idle)
      exit!(d.error.nil? && d.remaining == 2 && idle.size == 1 && (idle & parents).empty? ? 0 : 1)
    end
    _, status = Timeout.timeout(10) { Process.wait2(pid) }
    assert_predicate status, :success?, "the child decided on a connection of its own"
  end

  # A connection the Watchdog shut down as its call ended (the tick
  # between the deadline and the answer) goes back to the pool closed;
  # the next call finds it so and is made again on a new one.
  def test_connection_expired_after_its_call
    assert_nil @client.checked_insert("login", "k").error
    conn = @client.instance_variable_get(:@idle).last
    conn.instance_variable_set(:@deadline, 1.0)
    conn.expire(2.0)
    d = @client.checked_insert("login", "k")
    assert_nil d.error
    assert_equal 1, d.remaining
    refute_includes @client.instance_variable_get(:@idle), conn
  end

  # The usual answer, read by Client::USUAL, gives the Decision its JSON
  # gives: for numbers as Go writes them, strings of any letters, and the
  # answers USUAL leaves to JSON (escapes, more fields). sluice serve's own
  # answers, allowed and denied, are usual ones.
  def test_usual_answers_read_as_json
    header = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    usual = []
    [true, false].product(["api", "ключ", "", "a b/c"], [0, 1_000_000_000], ["5/h", "3/h;20/day"], [0, -3, 999_999_999],
                          %w[0 0.001 1e-07 1e+21 59.999], %w[0 2 0.5 1e-05 1199.999]).each do |al, rule, lim, pol, rem, reset, wait|
      usual << %({"allowed":#{al},"rule":"#{rule}","limit":#{lim},"policy":"#{pol}","remaining":#{rem},) +
               %("reset_after":#{reset},"retry_after":#{wait}}\n)
    end
    base = '{"allowed":false,"rule":"api","limit":5,"policy":"5/h","remaining":0,"reset_after":1.5,"retry_after":720'
    others = ["#{base},\"shadowed\":true}", "#{base},\"guard\":\"banned\"}", base.sub('"api"', '"a\\"pi"') + "}",
              base.sub('"api"', '"\\u00e9"') + "}", "#{base}} "]
    usual << "#{base.sub("720", "7.2E2")}}" # JSON's, if not Go's
    (usual + others).each do |data|
      data = data.dup.force_encoding(Encoding::UTF_8)
      assert_equal usual.include?(data), Sluice::Client::USUAL.match?(data), data
      got = @client.send(:answer, "/v1/check", "api", 200, header, data, 200)
      assert_equal @client.send(:decision, JSON.parse(data), header, "/v1/check"), got, data
    end
    uri = URI("#{@server.url}/v1/check")
    4.times do |i|
      body = Net::HTTP.post(uri, '{"rule":"login","key":"usual"}', "Content-Type" => "application/json").body
      assert_match Sluice::Client::USUAL, body, "sluice serve's answer #{i + 1}"
    end
  end

  # A Decision's RateLimit fields, found when first asked for, are its
  # own answer's: read after the connection has carried other calls, for
  # keys of any bytes, and by what reads every member.
  def test_headers_read_late
    keys = ["k", "\x00\xff".b, "ключ", "\r\n\r\n"]
    decisions = keys.map { |key| [@client.checked_insert("login", key), @client.checked_insert("login", key)] }
    assert_equal 1, @client.instance_variable_get(:@idle).size, "one kept-alive connection"
    decisions.each do |first, second|
      assert_match(/\A"login";r=2;t=\d+\z/, first.headers["RateLimit"])
      assert_match(/\A"login";r=1;t=\d+\z/, second.to_h[:headers]["RateLimit"])
      assert_equal '"login";q=3;w=3600', second.headers["RateLimit-Policy"]
      assert_equal first, first.dup.tap(&:headers)
      assert_equal first.headers, first.freeze.to_h[:headers]
    end
    assert_equal({}, Sluice::Decision.new(allowed: true, headers: "HTTP/1.1 200 OK\r\nRateLimitX: 1\r\n\r\n").headers)
  end

  # Fields in any case, a chunked body, the last field of a name wins.
  def test_answer_header
    body = '{"allowed":false,"rule":"api","remaining":0,"retry_after":2}'
    answer = "HTTP/1.1 200 OK\r\nratelimit: \"old\"\r\nRATELIMIT:  \"api\";r=0;t=2 \r\n" \
             "Transfer-Encoding: Chunked\r\nRateLimit-Policy:\"api\";q=5;w=3600\r\n\r\n" \
             "#{body.bytesize.to_s(16)}\r\n#{body}\r\n0\r\n\r\n"
    server = Support::BadServer.new(answer)
    c = Sluice::Client.new(server.url, timeout: 5)
    d = c.checked_insert("api", "k")
    assert_nil d.error
    refute d.allowed
    assert_equal 2.0, d.retry_after
    assert_equal({ "RateLimit" => '"api";r=0;t=2', "RateLimit-Policy" => '"api";q=5;w=3600' }, d.headers)
  ensure
    c&.close
    server&.close
  end
end
