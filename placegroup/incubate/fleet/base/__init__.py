"""Fleet's base: who this process is (``role_maker``) and what every fleet offers (``fleet_base``)."""
