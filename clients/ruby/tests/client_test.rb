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
        t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        d = c.checked_insert("login", "k")
        assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t, :<, 1.3, url
        assert_equal allowed, d.allowed, "#{url} failing #{failure}"
        assert_kind_of Sluice::Unavailable, d.error
        assert_raises(Sluice::Unavailable) { c.commit("login", "k", "id-1") } if url == dead_url
        c.close
      end
    end
  ensure
    servers&.each(&:close)
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
