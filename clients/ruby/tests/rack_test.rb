# frozen_string_literal: true

# The Rack middleware through Rack::Test, against a real sluice serve.
class RackTest < Minitest::Test
  include Rack::Test::Methods

  LOGIN_FORM = lambda do |env|
    ok = Rack::Request.new(env).POST["password"] == "right"
    [ok ? 200 : 401, { "content-type" => "text/plain" }, [ok ? "welcome" : "wrong username or password"]]
  end

  def setup
    @server = Support::Server.new
    @options = {}
  end

  def teardown
    @server.stop
  end

  def app
    client = Sluice::Client.new(@server.url, timeout: 5, **@options)
    Rack::Builder.new do
      use Sluice::RackLimit, client: client, limits: [
        { rule: "form-ip", key: :ip, only_failures: true, reset_on_success: true, paths: ["/login"] },
        { rule: "form-user", key: "field:user", only_failures: true, paths: ["/login"] },
        { rule: "api", key: "header:X-Api-Key", paths: ["/api/"] },
        { rule: "login", shadow: true, paths: ["/comment"] },
      ]
      map("/comment") { run ->(env) { [200, {}, [env["sluice.limited"] ? "dropped" : "posted"]] } }
      run LOGIN_FORM
    end
  end

  def post_login(step, session = current_session)
    session.post "/login", { "user" => step["user"], "password" => step["password"] }, "REMOTE_ADDR" => step["address"]
    session.last_response
  end

  # A login form attacked from several addresses, and a user who keeps
  # signing in: the Go client's decisions.
  def test_form_script
    Support.script["form"].each_with_index do |step, i|
      resp = post_login(step)
      assert_equal step["want"], resp.status, "step #{i} #{step}"
      assert resp.headers["ratelimit"] && resp.headers["ratelimit-policy"], "step #{i}: RateLimit fields"
      next unless resp.status == 429

      assert_operator resp.headers["retry-after"].to_i, :>, 0
      assert_equal "application/problem+json", resp.headers["content-type"]
      assert_equal 429, JSON.parse(resp.body)["status"]
    end
  end

  def test_header_and_shadow
    got = 6.times.map { get("/api/items", {}, "HTTP_X_API_KEY" => "key-1").status }
    assert_equal [401] * 5 + [429], got # the form answers 401 to a GET
    got = 5.times.map { get("/comment", {}, "REMOTE_ADDR" => "192.0.2.9").body }
    assert_equal %w[posted posted posted dropped dropped], got
  end

  def test_misconfigured
    assert_raises(ArgumentError) { Sluice::RackLimit.new(LOGIN_FORM, client: nil, limits: [{ rule: "x", key: "cookie:a" }]) }
    limit = Sluice::RackLimit.new(LOGIN_FORM, client: Sluice::Client.new(@server.url), limits: [{ rule: "logn" }])
    e = assert_raises(Sluice::InvalidRequest) { limit.call(Rack::MockRequest.env_for("/")) }
    assert_match(/rule 'logn'/, e.message)
  end

  def test_service_stops
    step = { "user" => "alice", "password" => "guess", "address" => "198.51.100.1" }
    assert_equal 401, post_login(step).status
    @server.stop
    { open: 401, closed: 429 }.each do |failure, want|
      @options = { timeout: 0.3, failure: failure }
      session = Rack::Test::Session.new(app)
      3.times do
        t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        assert_equal want, post_login(step, session).status, "failing #{failure}"
        # A hang guard, not a timing: a loaded machine may take seconds.
        assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - t, :<, 10
      end
    end
  end
end
