//! `Fn::Cidr`: split an address block into `count` subnets of `cidr_bits` host bits.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `Fn::Cidr`'s arguments cannot make subnets (the message says which).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CidrError(pub String);

/// Returns the subnets in order from the start of `block`, or a message saying
/// why the arguments cannot work.
pub fn subnets(block: &str, count: u64, cidr_bits: u32) -> Result<Vec<String>, CidrError> {
    subnets_text(block, count, cidr_bits).map_err(CidrError)
}

/// [`subnets`], its texts.
fn subnets_text(block: &str, count: u64, cidr_bits: u32) -> Result<Vec<String>, String> {
    let (addr, prefix) = block.split_once('/').ok_or_else(|| {
        format!("Fn::Cidr: '{block}' is not a CIDR block (write e.g. 10.0.0.0/16)")
    })?;
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("Fn::Cidr: '{addr}' is not an IP address"))?;
    let prefix: u32 = prefix
        .parse()
        .map_err(|_| format!("Fn::Cidr: '{prefix}' is not a prefix length"))?;
    let width = if ip.is_ipv4() { 32 } else { 128 };
    if prefix > width {
        return Err(format!(
            "Fn::Cidr: prefix /{prefix} is longer than {width} bits"
        ));
    }
    if !(1..=256).contains(&count) {
        return Err(format!(
            "Fn::Cidr: count must be between 1 and 256, got {count}"
        ));
    }
    if cidr_bits == 0 || cidr_bits > width - prefix {
        return Err(format!(
            "Fn::Cidr: cidrBits {cidr_bits} does not fit in a /{prefix} block (must be 1 to {})",
            width - prefix
        ));
    }
    let available: u128 = 1u128 << (width - prefix - cidr_bits).min(127);
    if u128::from(count) > available {
        return Err(format!(
            "Fn::Cidr: a /{prefix} block holds only {available} subnets of {cidr_bits} host bits, {count} requested"
        ));
    }
    let base: u128 = match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    };
    let host_mask: u128 = if width - prefix >= 128 {
        u128::MAX
    } else {
        (1u128 << (width - prefix)) - 1
    };
    let network = base & !host_mask;
    let sub_prefix = width - cidr_bits;
    Ok((0..u128::from(count))
        .map(|i| {
            let start = network + (i << cidr_bits);
            match ip {
                IpAddr::V4(_) => format!("{}/{sub_prefix}", Ipv4Addr::from(start as u32)),
                IpAddr::V6(_) => format!("{}/{sub_prefix}", Ipv6Addr::from(start)),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_documentation_examples() {
        assert_eq!(
            subnets("192.168.0.0/24", 6, 5).unwrap(),
            vec![
                "192.168.0.0/27",
                "192.168.0.32/27",
                "192.168.0.64/27",
                "192.168.0.96/27",
                "192.168.0.128/27",
                "192.168.0.160/27"
            ]
        );
        assert_eq!(
            subnets("10.0.0.0/16", 2, 8).unwrap(),
            vec!["10.0.0.0/24", "10.0.1.0/24"]
        );
        assert_eq!(
            subnets("2001:db8::/56", 2, 64).unwrap(),
            vec!["2001:db8::/64", "2001:db8:0:1::/64"]
        );
    }

    #[test]
    fn errors() {
        assert!(subnets("10.0.0.0/24", 9, 5)
            .unwrap_err()
            .0
            .contains("holds only 8 subnets"));
        assert!(subnets("10.0.0.0", 1, 5).is_err());
        assert!(subnets("10.0.0.0/24", 1, 9).is_err());
        assert!(subnets("10.0.0.0/24", 0, 4).is_err());
    }
}
